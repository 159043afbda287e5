"""The pieces of the HTTP push stream that need no server (#31): event ids, SSE parsing, whose stream
a credential may open."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from vantage_peers.core.principal import Principal
from vantage_peers.core.scopes import ScopeProfile
from vantage_peers.http.push import Refused, event_id, parse_event_id, stream_params
from vantage_peers.http.push_client import sse_events, stream_url

URIS = ("vp://inbox/bob", "vp://tasks/bob")


def test_event_ids_round_trip_and_unreadable_ones_mean_told_nothing():
    last = {URIS[0]: "a" * 16, URIS[1]: "b" * 16}
    assert parse_event_id(event_id(last, URIS), URIS) == last
    assert parse_event_id(None, URIS) is None
    for bad in ("", "v2.x.y", "v1.only-one", "garbage"):
        assert parse_event_id(bad, URIS) == {u: "" for u in URIS}


def test_sse_events_parses_ids_data_priming_and_skips_pings():
    lines = ["id: v1.a.b", "retry: 1000", "data: ", "", ": ping", "",
             "id: v1.c.b", 'data: {"method": "x",', 'data: "params": {}}', ""]
    assert list(sse_events(iter(lines))) == [("v1.a.b", None), ("v1.c.b", {"method": "x", "params": {}})]


def test_stream_url_accepts_the_root_or_mcp():
    assert stream_url("https://vp.example.com/") == stream_url("https://vp.example.com/mcp") == \
        "https://vp.example.com/mcp"


def _request(query: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/mcp", "query_string": query.encode(), "headers": []})


def _token(*who: str, master: bool = False) -> Principal:
    return Principal(token="t", client_id="c", scopes=["mcp:full"], expires_at=None, kind="oauth",
                     profile=ScopeProfile("p", from_allow_list=who, master=master))


def test_whose_stream_a_credential_opens():
    assert stream_params(_request(""), _token("bob")) == ("bob", None, None)
    assert stream_params(_request("pending=messages,work&instance=i1"), _token("bob")) == \
        ("bob", "i1", ("messages", "work"))
    assert stream_params(_request("orchestrator=alice"), _token("alice", "bob"))[0] == "alice"
    assert stream_params(_request("orchestrator=bob"), None)[0] == "bob"  # --no-auth: like stdio
    for query, principal, status in (("orchestrator=bob", _token("carol"), 403),  # another identity
                                     ("", _token("alice", "bob"), 405),  # which one?
                                     ("", _token("x", master=True), 405),  # master names nobody
                                     ("", None, 405),
                                     ("pending=mail", _token("bob"), 400),
                                     ("orchestrator=", _token("bob"), 400)):
        with pytest.raises(Refused) as caught:
            stream_params(_request(query), principal)
        assert caught.value.status == status, (query, caught.value.message)
