"""What the consent page says a client will get: its scope profile in words, or — when the profile
grants nothing (DCR's `client-generic`, a CIMD client) — the operator command that grants access,
with the exact `client_id`. HTML-escaped here; consent.py only places it."""

from __future__ import annotations

import html
import shlex

from .profiles import ScopeProfile


def _list(items: tuple[str, ...]) -> str:
    return ", ".join(f"<code>{html.escape(i)}</code>" for i in items)


def grants_nothing(profile: ScopeProfile | None) -> bool:
    return profile is None or not (profile.master or profile.read_prefixes or profile.write_prefixes
                                   or profile.from_allow_list)


def operator_command(client_id: str) -> str:
    return f"vantage-peers token set-profile {shlex.quote(client_id)} <profile>"


def access_html(client_id: str, profile_id: str, profile: ScopeProfile | None) -> str:
    """The "What it will get" block of the consent card."""
    cid = f"<code class=\"id\">{html.escape(client_id)}</code>"
    if grants_nothing(profile):
        return (
            '<div class="access none" role="note"><h2>What it will get: no access yet</h2>'
            f"<p>Its scope profile <code>{html.escape(profile_id or 'none')}</code> grants nothing: after you "
            "approve, every call it makes fails with <code>FORBIDDEN</code> until an operator of this "
            "server grants it a profile:</p>"
            f"<pre>{html.escape(operator_command(client_id))}</pre>"
            "<p>(<code>vantage-peers token profile list</code> shows the profiles.) Its client id: "
            f"{cid}</p></div>")
    assert profile is not None
    rows = []
    if profile.master:
        rows.append("<li>Everything: full administrative access.</li>")
    if profile.read_prefixes:
        rows.append(f"<li>Reads the namespaces {_list(profile.read_prefixes)}.</li>")
    if profile.write_prefixes:
        rows.append(f"<li>Writes the namespaces {_list(profile.write_prefixes)}.</li>")
    else:
        rows.append("<li>Writes nothing.</li>")
    if profile.from_allow_list:
        rows.append(f"<li>Acts as {_list(profile.from_allow_list)}.</li>")
    return (
        '<div class="access" role="note"><h2>What it will get</h2>'
        f"<p>Scope profile <code>{html.escape(profile.profile_id)}</code>"
        + (f" — {html.escape(profile.description)}" if profile.description else "") + ":</p>"
        f"<ul>{''.join(rows)}</ul>"
        f"<p>An operator can change it with <code>{html.escape(operator_command(client_id))}</code>. "
        f"Its client id: {cid}</p></div>")
