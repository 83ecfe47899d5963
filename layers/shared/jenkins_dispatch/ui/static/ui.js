// jenkins-dispatch ui: every data-refresh seconds, while the page is visible and nobody is typing in a field or
// has ticked a job, fetch this same page from this same server and replace only the parts marked data-live
// (counts, rows, tables, charts) with the fresh ones. No full reload, nothing from elsewhere (the CSP allows
// connect-src 'self' only). Nothing else runs here.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!(seconds > 0) || !window.fetch || !window.DOMParser) { return; }
  function busy() {
    var el = document.activeElement;
    if (el && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName)) { return true; }
    return document.querySelector("input[type=checkbox]:checked") !== null;
  }
  function swap(fresh) {
    var parts = document.querySelectorAll("[data-live]");
    for (var i = 0; i < parts.length; i++) {
      var key = parts[i].getAttribute("data-live");
      var next = fresh.querySelector("[data-live='" + key + "']");
      if (next) { parts[i].replaceWith(document.importNode(next, true)); }
    }
    document.body.setAttribute("data-refreshed", String(Date.now()));
  }
  function refresh() {
    if (document.visibilityState !== "visible" || busy()) { return; }
    window.fetch(window.location.href, {credentials: "same-origin", headers: {"X-Live-Refresh": "1"}})
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (text) {
        if (text !== null && !busy()) { swap(new window.DOMParser().parseFromString(text, "text/html")); }
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(refresh, seconds * 1000);
}());
