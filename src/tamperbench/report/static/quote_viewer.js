// Exact Words response viewer: gold sentence, answer, verdict, evidence. Text only via textContent.
(function () {
  var rows = TB.chunks["responses"] || [], fc = document.getElementById("f-category"),
      fa = document.getElementById("f-arm"), list = document.getElementById("responses"),
      count = document.getElementById("count");
  function field(box, name, text, cls) {
    var p = document.createElement("div"), b = document.createElement("b"), s = document.createElement("span");
    b.textContent = name + ": "; s.textContent = text; if (cls) s.className = cls;
    p.appendChild(b); p.appendChild(s); box.appendChild(p);
  }
  function render() {
    list.textContent = "";
    var n = 0;
    rows.forEach(function (r) {
      if (fc.value && r.category !== fc.value) return;
      if (fa.value && r.arm !== fa.value) return;
      n++;
      if (n > 200) return;
      var box = document.createElement("article"); box.className = "trial"; box.setAttribute("data-category", r.category);
      var h = document.createElement("h3"); h.textContent = r.item + " (" + r.arm + ", " + r.model + ")"; box.appendChild(h);
      field(box, "gold", r.gold, "reply");
      field(box, "answer", r.answer, "reply");
      field(box, "verdict", r.category + (r.sub_label ? " / " + r.sub_label : ""), "verdict");
      field(box, "evidence", JSON.stringify(r.evidence), "reply");
      list.appendChild(box);
    });
    count.textContent = n + " of " + rows.length + " responses" + (n > 200 ? " (first 200 shown)" : "");
  }
  [fc, fa].forEach(function (el) { el.addEventListener("change", render); });
  render();
})();
