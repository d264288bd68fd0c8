// Sleight of Word trial viewer. Model text is only ever assigned with textContent, never as HTML.
(function () {
  var root = document.currentScript.getAttribute("data-root") || "";
  var idx = TB.chunks["index"], PAGE = 25, shown = PAGE;
  var fq = document.getElementById("f-question"), fw = document.getElementById("f-word"),
      fl = document.getElementById("f-label"), list = document.getElementById("trials"),
      more = document.getElementById("more"), count = document.getElementById("count");
  function opt(sel, value, text) { var o = document.createElement("option"); o.value = value; o.textContent = text; sel.appendChild(o); }
  idx.questions.forEach(function (q, i) { opt(fq, String(i), q.text); });
  idx.words.forEach(function (w, i) { opt(fw, String(i), w); });
  function chunk(qi, done) {
    var name = "q" + qi;
    if (TB.chunks[name]) return done(TB.chunks[name]);
    (TB.waiting[name] = TB.waiting[name] || []).push(done);
    if (TB.waiting[name].length > 1) return;
    var s = document.createElement("script");
    s.src = root + idx.questions[qi].chunk;
    document.body.appendChild(s);
  }
  function matches() {
    var q = fq.value, w = fw.value, l = fl.value, li = TB.labels.indexOf(l), out = [];
    idx.trials.forEach(function (t, i) {
      if (q !== "" && String(t[0]) !== q) return;
      if (w !== "" && String(t[1]) !== w) return;
      if (l === "unjudged" && t[2].indexOf("?") < 0) return;
      if (li >= 0 && t[2][li] !== "1") return;
      out.push(i);
    });
    return out;
  }
  function reply(pieces, surprisal, injected, text) {
    var div = document.createElement("div");
    div.className = "reply";
    if (!pieces) { div.textContent = text; return div; }
    var inj = {};
    (injected || []).forEach(function (i) { inj[i] = true; });
    pieces.forEach(function (p, i) {
      var s = document.createElement("span");
      s.className = "tok" + (inj[i] ? " inj" : "");
      s.textContent = p;
      var a = Math.min(1, Math.max(0, (surprisal[i] || 0) / 10));
      s.style.background = "rgba(220,40,40," + a.toFixed(2) + ")";
      s.title = "surprisal " + (surprisal[i] || 0).toFixed(2) + " nats";
      div.appendChild(s);
    });
    return div;
  }
  function card(q, t) {
    var box = document.createElement("article"), h = document.createElement("h3");
    box.className = "trial";
    box.setAttribute("data-word", t.word);
    h.textContent = q.question + "  [the \u2192 " + t.word + ", " + t.swaps + " swaps]";
    box.appendChild(h);
    var pair = document.createElement("div"); pair.className = "pair";
    [["clean answer", q.clean ? reply(q.clean.pieces, q.clean.surprisal, [], q.clean.text) : null],
     ["tampered reply", reply(t.pieces, t.surprisal, t.injected, t.text)]].forEach(function (x) {
      var col = document.createElement("div"), h4 = document.createElement("h4");
      h4.textContent = x[0]; col.appendChild(h4);
      if (x[1]) col.appendChild(x[1]);
      pair.appendChild(col);
    });
    box.appendChild(pair);
    var v = document.createElement("div"); v.className = "verdict";
    v.textContent = t.verdict ? "jury: " + TB.labels.filter(function (l) { return t.verdict[l]; }).join(", ") || "jury: no label" : "not judged";
    box.appendChild(v);
    if (t.votes.length) {
      var ul = document.createElement("ul"); ul.className = "votes";
      t.votes.forEach(function (vote) {
        var li = document.createElement("li");
        var labs = ["flagged", "corrected", "derailed", "aware"].map(function (l) { return l + "=" + vote[l]; }).join(" ");
        li.textContent = vote.judge + " (" + vote.status + "): " + labs + (vote.rationale ? " \u2014 " + vote.rationale : "");
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    return box;
  }
  var generation = 0;
  function render() {
    var gen = ++generation, m = matches(), pick = m.slice(0, shown);
    count.textContent = m.length + " of " + idx.trials.length + " trials match";
    more.hidden = m.length <= shown;
    list.textContent = "";
    var slots = pick.map(function () { var d = document.createElement("div"); list.appendChild(d); return d; });
    pick.forEach(function (ti, k) {
      var t = idx.trials[ti], qi = t[0], word = idx.words[t[1]];
      chunk(qi, function (q) {
        if (gen !== generation) return;
        var rowsOfQ = q.trials.filter(function (r) { return r.word === word; });
        rowsOfQ.forEach(function (r) { slots[k].appendChild(card(q, r)); });
        list.setAttribute("data-rendered", String(list.querySelectorAll("article.trial").length));
      });
    });
    if (!pick.length) list.setAttribute("data-rendered", "0");
  }
  [fq, fw, fl].forEach(function (el) { el.addEventListener("change", function () { shown = PAGE; render(); }); });
  more.addEventListener("click", function () { shown += PAGE; render(); });
  render();
})();
