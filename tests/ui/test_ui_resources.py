"""ui://vp/v1/<primitive> resources: listing, reads with query strings, labels, errors, hostile content."""

from __future__ import annotations

import re

import pytest
from support.ui_helpers import seed_all, structure

from vantage_peers.ui import render as R
from vantage_peers.ui.resources import PRIMITIVES

SIX = {"tasks-table", "messages-feed", "diary-entry", "mission-timeline", "briefing-note", "memory-quote"}


def read(tools, uri: str) -> str:
    result = tools.portal.call(tools.client.read_resource, uri)
    assert len(result.contents) == 1
    assert result.contents[0].mime_type == "text/html"
    return result.contents[0].text


def test_resources_list_shows_exactly_the_six(tools):
    listed = tools.portal.call(tools.client.list_resources).resources
    # the six fragments, and the same six as MCP Apps views (tests/ui/test_ui_apps.py)
    fragments = [r for r in listed if not str(r.uri).startswith("ui://vp/v1/app/")]
    assert sorted(str(r.uri) for r in fragments) == sorted(f"ui://vp/v1/{p}" for p in SIX)
    assert all(r.mime_type == "text/html" and r.description for r in fragments)
    assert sorted(str(r.uri) for r in listed if r not in fragments) == sorted(f"ui://vp/v1/app/{p}" for p in SIX)
    templates = tools.portal.call(tools.client.list_resource_templates).resource_templates
    ui = {t.uri_template.split("{")[0] for t in templates if t.uri_template.startswith("ui://")}
    assert ui == {f"ui://vp/v1/{p}" for p in SIX}
    # Besides them only the #21 inbox / task-queue templates (tests/domains/messaging/test_inbox_resources.py).
    assert {t.uri_template for t in templates if not t.uri_template.startswith("ui://")} == {
        "vp://inbox/{orchestrator}", "vp://tasks/{orchestrator}"}


def test_each_primitive_renders_its_rows_and_honours_limit(tools):
    seed_all(tools, "row", n=4)
    uris = {
        "tasks-table": "ui://vp/v1/tasks-table?assignedTo=sigma&status=open&limit=3",
        "messages-feed": "ui://vp/v1/messages-feed?from=pi&channel=fleet&limit=3",
        "diary-entry": "ui://vp/v1/diary-entry?orchestrator=sigma&limit=3",
        "mission-timeline": "ui://vp/v1/mission-timeline?pilot=tau&status=active&limit=3",
        "briefing-note": "ui://vp/v1/briefing-note?topic=deployment&limit=3",
        "memory-quote": "ui://vp/v1/memory-quote?namespace=sigma&type=feedback&limit=3",
    }
    for primitive, uri in uris.items():
        page = read(tools, uri)
        assert f'class="vp-root vp-{primitive}"' in page, primitive
        assert "<style>" in page and "vp-error" not in page.split("</style>", 1)[1], primitive
        assert len(set(re.findall(r">row \d", page))) == 3, primitive  # limit=3 of the 4 rows
        # without limit every row is there (defaults are 5..20 >= 4)
        assert len(set(re.findall(r">row \d", read(tools, uri.split("&limit")[0])))) == 4, primitive
    # filters narrow: another assignee / namespace shows nothing
    assert "No tasks." in read(tools, "ui://vp/v1/tasks-table?assignedTo=nobody")
    assert "No memories." in read(tools, "ui://vp/v1/memory-quote?namespace=other")


def test_tasks_table_structure_badges_and_french_labels(tools, app):
    for status in ("todo", "in_progress", "review", "blocked", "done"):
        tools.call("create_task", title=f"t-{status}", assignedTo="sigma", priority="low", createdBy="pi",
                   status="todo" if status == "done" else status)
    app.db.write(lambda c: c.execute("UPDATE tasks SET status = 'done' WHERE title = 't-done'"))
    en = read(tools, "ui://vp/v1/tasks-table?assignedTo=sigma")
    for status in ("todo", "in_progress", "review", "blocked", "done"):
        assert f"vp-status-{status}" in en
    assert en.count('scope="col"') == 4 and ">Assigned to<" in en and "5 tasks" in en
    assert 'aria-live="polite"' in en and 'role="region"' in en and 'aria-label="Tasks"' in en
    fr = read(tools, "ui://vp/v1/tasks-table?assignedTo=sigma&status=in_progress&lang=fr")
    assert 'lang="fr"' in fr and ">Titre<" in fr and ">Attribué à<" in fr and "1 tâche" in fr
    assert fr.count("<tr>") == 2  # header + the one in_progress task
    # the badge shows the status in the page's language, never the raw enum value
    assert ">en cours</span>" in fr and ">in_progress<" not in fr
    assert ">in progress</span>" in en and ">to do</span>" in en


def test_french_labels_on_every_primitive(tools):
    seed_all(tools, "x", n=3)
    expected = {"tasks-table": "3 tâches", "messages-feed": "3 messages", "diary-entry": "3 entrées",
                "mission-timeline": "3 missions", "briefing-note": "3 notes", "memory-quote": "3 mémoires"}
    for primitive, footer in expected.items():
        page = read(tools, f"ui://vp/v1/{primitive}?lang=fr")
        assert footer in page, primitive
        assert 'lang="fr"' in page
    assert "Points forts" in read(tools, "ui://vp/v1/diary-entry?lang=fr")
    assert "Progression" in read(tools, "ui://vp/v1/mission-timeline?lang=fr")


def test_single_diary_date_and_single_briefing_note(tools):
    ids = seed_all(tools, "one", n=3)
    page = read(tools, "ui://vp/v1/diary-entry?date=2026-06-02&orchestrator=sigma")
    assert page.count("<article") == 1 and "one 1" in page
    page = read(tools, f"ui://vp/v1/briefing-note?noteId={ids['note'][2]}")
    assert page.count("<article") == 1 and "one 2" in page


@pytest.mark.parametrize("uri, needle", [
    ("ui://vp/v1/tasks-table?limit=abc", "limit must be an integer"),
    ("ui://vp/v1/tasks-table?status=bogus", "status"),
    ("ui://vp/v1/diary-entry?date=June", "date must be YYYY-MM-DD"),
    ("ui://vp/v1/briefing-note?noteId=brf_missing", "NOT_FOUND"),
    ("ui://vp/v1/memory-quote?type=nonsense", "type must be one of"),
    ("ui://vp/v1/mission-timeline?lang=de", "lang must be en or fr"),
    ("ui://vp/v1/messages-feed?from=" + "x" * 600, "longer than"),
])
def test_bad_parameter_is_an_error_div_not_a_failed_read(tools, uri, needle):
    page = read(tools, uri)
    assert 'class="vp-root vp-error' in page and 'role="alert"' in page
    assert needle in page


def test_a_failing_query_is_an_error_div(tools, app):
    app.db.conn.raw.execute("DROP TABLE briefingNotes")  # the data query now fails inside SQLite
    page = read(tools, "ui://vp/v1/briefing-note")
    assert "vp-error" in page and "INTERNAL" in page
    assert "Impossible de charger" in read(tools, "ui://vp/v1/briefing-note?lang=fr")


def test_out_of_range_limit_is_clamped(tools):
    seed_all(tools, "c", n=2)
    assert "1 task" in read(tools, "ui://vp/v1/tasks-table?limit=0")  # 0 clamps to 1 row
    assert read(tools, "ui://vp/v1/tasks-table?limit=0").count("<tr>") == 2
    assert read(tools, "ui://vp/v1/tasks-table?limit=99999").count("<tr>") == 3


HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "javascript:alert(document.cookie)",
    "' onmouseover='alert(1)' x='",
    '" style="background:url(javascript:alert(1))',
    "\u202eevil\u202c</td><td>",
    "</style><style>*{display:none}</style>",
    "<!-- --><svg onload=alert(1)>",
]


def _docs(text: str) -> dict[str, list[dict]]:
    return {
        "tasks-table": [{"_id": text, "title": text, "status": text, "priority": text, "assignedTo": text}],
        "messages-feed": [{"_id": text, "from": text, "channel": text, "content": text, "createdAt": 1}],
        "diary-entry": [{"_id": text, "date": text, "orchestrator": text, "content": text, "highlights": [text],
                         "blockers": [text]}],
        "mission-timeline": [{"_id": text, "name": text, "project": text, "status": text, "pilot": text,
                              "priority": text, "progress": 50}],
        "briefing-note": [{"_id": text, "topic": text, "title": text, "participants": [text], "content": text}],
        "memory-quote": [{"_id": text, "namespace": text, "type": text, "content": text, "score": 0.5}],
    }


@pytest.mark.parametrize("attack", HOSTILE)
def test_hostile_content_creates_no_element_or_attribute(attack):
    benign, hostile = _docs("benign"), _docs(attack)
    for primitive in SIX:
        for lang in ("en", "fr"):
            safe = structure(R.RENDERERS[primitive](benign[primitive], lang))
            bad = structure(R.RENDERERS[primitive](hostile[primitive], lang))
            # identical element/attribute skeleton: nothing in the data became markup
            assert bad.tags == safe.tags, primitive
            names = {a for _, attrs in bad.tags for a in attrs}
            assert not {a for a in names if a.startswith("on")} and not names & {"href", "src"}, primitive
            text = "".join(bad.text)
            visible = attack.replace("\u202e", "").replace("\u202c", "")
            assert visible in text or visible in " ".join(bad.values), primitive  # shown as text, escaped
            assert "\u202e" not in text


def test_hostile_content_through_the_resource(tools):
    seed_all(tools, HOSTILE[1], n=1)
    for primitive in SIX:
        page = read(tools, f"ui://vp/v1/{primitive}")
        tags = {t for t, _ in structure(page).tags}
        assert not tags & {"img", "script", "svg"}, primitive
        assert "onerror" not in {a for _, attrs in structure(page).tags for a in attrs}


def test_primitives_table_matches_spec_defaults():
    limits = {p.name: (p.limit_default, p.limit_max) for p in PRIMITIVES}
    assert limits == {"tasks-table": (20, 200), "messages-feed": (20, 200), "diary-entry": (5, 50),
                      "mission-timeline": (10, 100), "briefing-note": (5, 50), "memory-quote": (5, 50)}


def test_query_string_values_echoed_in_errors_are_escaped(tools):
    page = read(tools, "ui://vp/v1/tasks-table?limit=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
    assert "vp-error" in page and "&lt;img" in page
    assert "img" not in {t for t, _ in structure(page).tags}
    page = read(tools, "ui://vp/v1/diary-entry?date=%22%3E%3Cscript%3Ealert(1)%3C/script%3E")
    assert "script" not in {t for t, _ in structure(page).tags}
