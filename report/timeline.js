(function () {
  "use strict";
  var calls = JSON.parse(document.getElementById("calls").textContent);
  var detail = document.getElementById("detail");
  var timeline = document.getElementById("timeline");
  var kept = null;
  function line(label, text) {
    var p = document.createElement("div");
    var b = document.createElement("b");
    b.textContent = label + ": ";
    p.appendChild(b);
    p.appendChild(document.createTextNode(text));
    return p;
  }
  function show(i) {
    var c = calls[i];
    if (!c) { return; }
    detail.textContent = "";
    detail.dataset.call = String(i);
    detail.appendChild(line(c.t < 0 ? "run" : "task " + c.t, c.p + ", " + c.a + (c.r ? " (" + c.r + ")" : "")));
    detail.appendChild(line("argv", c.v.join(" ")));
    detail.appendChild(line("started", c.s + ", took " + c.d + ", exit " + c.x + ", " + c.o));
    if (c.why) { detail.appendChild(line("reason", c.why)); }
    if (c.c) { detail.appendChild(line("confinement", c.c)); }
    if (c.w) { detail.appendChild(line("then waited", c.w + " before the next attempt")); }
    if (c.ss) { detail.appendChild(line("session", c.ss)); }
    if (c.u) { detail.appendChild(line("usage", c.u)); }
    if (c.p === "merge") { return; }
    if (c.out) {
      var out = document.createElement("pre");
      out.textContent = c.out;
      detail.appendChild(line("output (its end)", ""));
      detail.appendChild(out);
      return;
    }
    if (c.l && c.l.length) {
      var pre = document.createElement("pre");
      pre.textContent = c.l.join("\n");
      detail.appendChild(line("log", ""));
      detail.appendChild(pre);
    } else {
      detail.appendChild(line("log", "none to show (agent_log_dir unset, not an agent call, or the file is gone)"));
    }
  }
  function barOf(e) {
    var t = e.target;
    return t && t.classList && t.classList.contains("bar") ? t : null;
  }
  timeline.addEventListener("mouseover", function (e) {
    var b = barOf(e);
    if (b && kept === null) { show(+b.dataset.c); }
  });
  timeline.addEventListener("click", function (e) {
    var b = barOf(e);
    var old = document.querySelector(".bar.sel");
    if (old) { old.classList.remove("sel"); }
    if (!b || kept === +b.dataset.c) { kept = null; return; }
    kept = +b.dataset.c;
    b.classList.add("sel");
    show(kept);
  });
  document.getElementById("controls").addEventListener("click", function (e) {
    var z = e.target && e.target.dataset ? e.target.dataset.z : null;
    if (z) { timeline.style.width = (100 * +z) + "%"; }
  });
})();
