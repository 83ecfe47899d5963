// jenkins-dispatch ui: reload the page every data-refresh seconds while it is visible and nobody is typing
// in one of its fields. Nothing else runs here.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!(seconds > 0)) { return; }
  function busy() {
    var el = document.activeElement;
    return el && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName);
  }
  window.setInterval(function () {
    if (document.visibilityState === "visible" && !busy()) { window.location.reload(); }
  }, seconds * 1000);
}());
