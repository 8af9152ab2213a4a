// The board reloads itself when its store changes: it asks for the journal's newest
// row every few seconds, and once a minute regardless (claims expire without a row).
// While the owner is in the middle of a decision (typing a reason or an answer, or a
// decision for good opened), it says the store changed instead of reloading under them.
(function () {
  "use strict";
  var body = document.body;
  var url = body.getAttribute("data-changes");
  if (!url) { return; }
  var seen = body.getAttribute("data-seq");
  var loaded = Date.now();
  function deciding() {
    var fields = document.querySelectorAll("form.decide textarea, form.decide input[type=text]");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value || fields[i] === document.activeElement) { return true; }
    }
    return document.querySelector("details.confirm[open]") !== null;
  }
  function changed() {
    if (!deciding()) { window.location.reload(); return; }
    if (document.querySelector("p.stale")) { return; }
    var note = document.createElement("p");
    note.className = "stale";
    note.setAttribute("role", "status");
    note.textContent = "The store changed since this page was drawn. ";
    var again = document.createElement("a");
    again.href = window.location.pathname + window.location.search;
    again.textContent = "Show it as it is now";
    note.appendChild(again);
    body.insertBefore(note, body.firstChild);
  }
  function check() {
    if (Date.now() - loaded > 60000) { changed(); return; }
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (answer) { return answer.ok ? answer.json() : null; })
      .then(function (changes) {
        if (changes && String(changes.seq) !== seen) { changed(); }
      })
      .catch(function () { /* the server is away: try again at the next tick */ });
  }
  window.setInterval(check, 3000);
})();
