// Progressive enhancement only: every page works without it.
// 1. Pages that refresh themselves (the overview) are re-read in the
//    background and their <main> swapped in, keeping open <details>
//    (a stderr tail being read) open; without JavaScript a <noscript>
//    meta refresh reloads the page instead.
// 2. The new-token field selects itself, ready to copy.
(function () {
  "use strict";
  var secs = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (secs > 0 && window.fetch && window.DOMParser) {
    setInterval(function () {
      if (document.hidden) return;
      var open = {};
      document.querySelectorAll("main details[open][id]").forEach(function (d) { open[d.id] = true; });
      fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var next = doc.querySelector("main"), cur = document.querySelector("main");
          if (!next || !cur) return;
          if (cur.contains(document.activeElement) && document.activeElement !== cur) return; // do not move the user's focus
          next.querySelectorAll("details[id]").forEach(function (d) { if (open[d.id]) d.open = true; });
          cur.innerHTML = next.innerHTML;
        })
        .catch(function () {});
    }, secs * 1000);
  }
  var tok = document.getElementById("newtoken");
  if (tok) { tok.focus(); tok.select(); }
})();
