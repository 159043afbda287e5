"""The consent page says what access the client will get — or, when none, the operator command with
its client id — escapes hostile names, and its long names and URIs wrap (checked in headless
Chromium at 390 and 1200 px wide)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx2
import pytest
from support.http_helpers import script, serving

LONG = "x" * 300
# The longest name registration accepts (200 characters, issue 19), hostile and unbroken.
HOSTILE_NAME = ('<script>alert(1)</script>"><img src=x onerror=alert(2)> ' + "Agent" + "A" * 200)[:200]
LONG_REDIRECT = "http://127.0.0.1:9/callback/" + "segment-" * 40 + "end"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("consent") / "vp.db") as s:
        yield s


def register(server, name: str, redirect: str) -> dict:
    r = server.http("POST", "/oauth/register", json={"client_name": name, "redirect_uris": [redirect]})
    assert r.status_code == 201, r.text
    return r.json()


def consent_page(server, client_id: str, redirect: str) -> str:
    url = (f"{server.base}/oauth/authorize?response_type=code&client_id={client_id}&redirect_uri={redirect}"
           "&code_challenge=" + "A" * 43 + "&code_challenge_method=S256&state=s")
    with httpx2.Client(timeout=30) as browser:
        first = browser.get(url)
        assert first.status_code == 302, first.text
        page = browser.get(first.headers["location"])
        assert page.status_code == 200
        return page.text


def token_cli(server, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VP_DB_PATH": str(server.db)}
    return subprocess.run([script(), "token", *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.slow
def test_no_access_yet_names_the_operator_command_and_client_id(server):
    client = register(server, "Fresh DCR client", "http://127.0.0.1:9/cb")
    page = consent_page(server, client["client_id"], "http://127.0.0.1:9/cb")
    assert "What it will get: no access yet" in page
    assert "client-generic" in page and "FORBIDDEN" in page
    assert f"vantage-peers token set-profile {client['client_id']} &lt;profile&gt;" in page
    assert page.count(client["client_id"]) >= 2  # in the command and as the client id

    # the operator runs exactly what the page says; the next consent names the access in words
    done = token_cli(server, "set-profile", client["client_id"], "project-example")
    assert done.returncode == 0, done.stderr
    page = consent_page(server, client["client_id"], "http://127.0.0.1:9/cb")
    assert "no access yet" not in page and "What it will get" in page
    assert "Reads the namespaces <code>project/example</code>, <code>global</code>" in page
    assert "Writes the namespaces <code>project/example</code>" in page and "Acts as <code>alice</code>" in page

    done = token_cli(server, "set-profile", client["client_id"], "public-readonly")
    assert done.returncode == 0, done.stderr
    page = consent_page(server, client["client_id"], "http://127.0.0.1:9/cb")
    assert "Reads the namespaces <code>global</code>" in page and "Writes nothing." in page


def test_hostile_and_long_names_are_escaped(server):
    client = register(server, HOSTILE_NAME, LONG_REDIRECT)
    page = consent_page(server, client["client_id"], LONG_REDIRECT)
    assert "<script>alert" not in page and "<img" not in page
    assert html.escape(HOSTILE_NAME) in page and LONG_REDIRECT in page


LAYOUT_PROBE = """<script>
addEventListener("load", () => {
  const vw = document.documentElement.clientWidth, card = document.querySelector(".box").getBoundingClientRect();
  const over = [...document.querySelectorAll(".box *")].filter((e) => e.getBoundingClientRect().right > card.right + 1)
    .map((e) => e.tagName);
  document.body.setAttribute("data-probe", JSON.stringify({vw, scroll: document.documentElement.scrollWidth,
    cardRight: Math.round(card.right), over}));
});
</script>"""


@pytest.mark.parametrize("width", [390, 1200])
def test_long_name_and_redirect_wrap_in_chromium(server, tmp_path, width):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    client = register(server, ("Agent" + "A" * 200)[:200], LONG_REDIRECT)
    page = consent_page(server, client["client_id"], LONG_REDIRECT)
    probe = tmp_path / "consent.html"
    probe.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
              f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1400"]
    dom = subprocess.run([*common, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120,
                         check=False).stdout
    found = re.search(r'data-probe="([^"]+)"', dom)
    assert found, dom[-2000:]
    import json

    probe_doc = json.loads(html.unescape(found.group(1)))
    assert probe_doc["scroll"] <= probe_doc["vw"], probe_doc  # no horizontal scrolling
    assert probe_doc["over"] == [], probe_doc  # nothing runs off the card
    shot = Path(os.environ.get("VP_CONSENT_SCREENSHOTS", tmp_path)) / f"consent-{width}.png"
    subprocess.run([*common, f"--screenshot={shot}", probe.as_uri()], capture_output=True, timeout=120, check=False)
    assert shot.exists() and shot.stat().st_size > 1000
