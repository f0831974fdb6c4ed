// corral serve: live updates only. Every page reads without this script; it is served
// by the app itself (CSP script-src 'self') and inserts only HTML the server rendered
// and escaped.
"use strict";
(function () {
  function followJournal(list) {
    var url = list.getAttribute("data-journal");
    function tick() {
      var count = list.getAttribute("data-count") || "0";
      fetch(url + "?after=" + encodeURIComponent(count),
            {cache: "no-store", credentials: "same-origin", redirect: "error"})
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          var running = response.headers.get("X-Corral-Running") === "1";
          var total = response.headers.get("X-Corral-Count") || count;
          return response.text().then(function (html) {
            if (html.trim()) { list.insertAdjacentHTML("beforeend", html); }
            list.setAttribute("data-count", total);
            if (running) { window.setTimeout(tick, 400); } else { window.location.reload(); }
          });
        })
        .catch(function () { window.setTimeout(tick, 2000); });
    }
    window.setTimeout(tick, 400);
  }

  function followFanout(box) {
    var url = box.getAttribute("data-live");
    function tick() {
      fetch(url, {cache: "no-store", credentials: "same-origin", redirect: "error"})
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          var running = response.headers.get("X-Corral-Running") === "1";
          return response.text().then(function (html) {
            if (!running) { window.location.reload(); return; }
            box.innerHTML = html;
            window.setTimeout(tick, 700);
          });
        })
        .catch(function () { window.setTimeout(tick, 2000); });
    }
    window.setTimeout(tick, 700);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.setAttribute("data-live", "on");
    var journal = document.getElementById("journal");
    if (journal && journal.getAttribute("data-running") === "1") { followJournal(journal); }
    var fanout = document.getElementById("fanout-live");
    if (fanout && fanout.getAttribute("data-running") === "1") { followFanout(fanout); }
  });
}());
