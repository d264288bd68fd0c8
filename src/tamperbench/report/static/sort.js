// Click (or press Enter on) a column header to sort its table; blanks always sort last.
(function () {
  function key(td) {
    var v = td.getAttribute("data-sort");
    if (v === null || v === "") return null;
    var n = Number(v);
    return isNaN(n) ? v : n;
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], col = Number(th.getAttribute("data-col"));
    var dir = th.getAttribute("aria-sort") === "descending" ? "ascending" : "descending";
    if (!th.hasAttribute("aria-sort") && th.closest("tr").cells[col] && isNaN(Number(key(body.rows[0] ? body.rows[0].cells[col] : th) || "x"))) dir = "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null && y === null) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
      return dir === "ascending" ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(th); });
  });
})();
