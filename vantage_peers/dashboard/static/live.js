// Live updates for the vantage-peers dashboard (no build step, no library).
// The server sends `event: change` whenever any process commits to the database file; the page
// then re-fetches its own URL with `X-Partial: 1` and swaps the #live region. Forms live outside
// #live, so what a person is typing is never replaced. EventSource reconnects by itself
// (the stream sets `retry: 1000`), so the page resumes after a server restart.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var state = document.getElementById("live-state");
  var source = document.body.getAttribute("data-events");
  if (!live || !source || !window.EventSource || !window.fetch) { return; }
  var busy = false;
  var again = false;

  function show(on) {
    if (!state) { return; }
    state.textContent = state.getAttribute(on ? "data-on" : "data-off");
    state.className = on ? "live on" : "live off";
  }

  function editing() {
    var el = document.activeElement;
    return el && live.contains(el) && /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName);
  }

  function refresh() {
    if (busy || editing()) { again = true; return; }
    busy = true;
    fetch(window.location.href, { headers: { "X-Partial": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) {
          live.innerHTML = html;
          document.body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () { /* the stream reports the outage */ })
      .then(function () {
        busy = false;
        if (again) { again = false; window.setTimeout(refresh, 50); }
      });
  }

  var events = new EventSource(source);
  events.addEventListener("hello", function () { show(true); refresh(); });
  events.addEventListener("change", function () { show(true); refresh(); });
  events.onerror = function () { show(false); };
  live.addEventListener("focusout", function () { if (again) { again = false; refresh(); } });
})();
