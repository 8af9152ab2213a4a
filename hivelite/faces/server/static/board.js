// The board reloads itself when its store changes: it asks for the journal's newest
// row every few seconds, and once a minute regardless (claims expire without a row).
(function () {
  "use strict";
  var body = document.body;
  var url = body.getAttribute("data-changes");
  if (!url) { return; }
  var seen = body.getAttribute("data-seq");
  var loaded = Date.now();
  function check() {
    if (Date.now() - loaded > 60000) { window.location.reload(); return; }
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (answer) { return answer.ok ? answer.json() : null; })
      .then(function (changes) {
        if (changes && String(changes.seq) !== seen) { window.location.reload(); }
      })
      .catch(function () { /* the server is away: try again at the next tick */ });
  }
  window.setInterval(check, 3000);
})();
