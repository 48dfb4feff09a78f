(function () {
  "use strict";
  var chart = document.getElementById("chart");
  var tip = document.getElementById("tip");

  // -- chart: layers / ops toggle and phase toggles ------------------------------------------------
  function showLevel(level) {
    document.querySelectorAll("#chart g.pts").forEach(function (g) {
      g.style.display = g.getAttribute("data-level") === level ? "" : "none";
    });
    document.querySelectorAll(".skipped").forEach(function (p) {
      p.hidden = p.getAttribute("data-level") !== level;
    });
  }
  document.querySelectorAll("input[name=level]").forEach(function (r) {
    r.addEventListener("change", function () { if (r.checked) { showLevel(r.value); } });
  });
  document.querySelectorAll("input.phase-toggle").forEach(function (box) {
    box.addEventListener("change", function () {
      document.querySelectorAll("#chart .pt.p" + box.value + ", #chart .pt-lab.p" + box.value).forEach(function (el) {
        el.style.display = box.checked ? "" : "none";
      });
    });
  });

  // -- tooltips: the <title> text, shown at once ----------------------------------------------------
  if (chart && tip) {
    chart.addEventListener("mouseover", function (ev) {
      var el = ev.target.closest(".pt, .roof");
      if (!el) { return; }
      var t = el.querySelector("title");
      if (t) { el.setAttribute("data-tip", t.textContent); t.remove(); }
      tip.textContent = el.getAttribute("data-tip") || "";
      tip.hidden = false;
    });
    chart.addEventListener("mousemove", function (ev) {
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 430) + "px";
      tip.style.top = (ev.clientY + 14) + "px";
    });
    chart.addEventListener("mouseout", function (ev) {
      if (ev.target.closest(".pt, .roof")) { tip.hidden = true; }
    });
    // click a point: open its row in the table
    chart.addEventListener("click", function (ev) {
      var el = ev.target.closest(".pt");
      if (!el) { return; }
      var name = (el.getAttribute("data-tip") || "").split("\n")[0];
      var table = document.querySelector("table.layers[data-phase='" + el.getAttribute("data-phase") + "']");
      if (!table) { return; }
      var level = el.closest("g.pts").getAttribute("data-level");
      var rows = table.querySelectorAll(level === "op" ? "tr.o[data-name]" : "tr.l[data-name]");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute("data-name") === name) {
          if (rows[i].classList.contains("o")) { setExpanded(rows[i].parentNode, true); }
          rows[i].scrollIntoView({block: "center"});
          rows[i].classList.add("flash");
          setTimeout(function (r) { r.classList.remove("flash"); }.bind(null, rows[i]), 1600);
          break;
        }
      }
    });
  }

  // -- layer table: expand per-op rows -------------------------------------------------------------
  function setExpanded(tbody, open) {
    var btn = tbody.querySelector("button.exp");
    if (!btn) { return; }
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    btn.textContent = open ? "\u25BE" : "\u25B8";
    tbody.querySelectorAll("tr.o").forEach(function (r) { r.hidden = !open; });
  }
  document.querySelectorAll("button.exp").forEach(function (btn) {
    btn.addEventListener("click", function () {
      setExpanded(btn.closest("tbody"), btn.getAttribute("aria-expanded") !== "true");
    });
  });
  document.querySelectorAll("button.expand-all").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var open = btn.getAttribute("data-open") !== "true";
      btn.setAttribute("data-open", open ? "true" : "false");
      btn.textContent = open ? "collapse all" : "expand all";
      var table = document.getElementById(btn.getAttribute("data-table"));
      table.querySelectorAll("tbody").forEach(function (tb) { setExpanded(tb, open); });
    });
  });

  // -- sortable tables: click a header; layers sort as groups, their ops sort inside ---------------
  function key(cell) {
    var v = cell ? cell.getAttribute("data-v") : null;
    if (v === null) { v = cell ? cell.textContent : ""; }
    var n = parseFloat(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }
  function cmp(a, b, dir) {
    if (typeof a !== typeof b) { a = String(a); b = String(b); }
    return (a < b ? -1 : a > b ? 1 : 0) * dir;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var ths = table.querySelectorAll("thead th");
    ths.forEach(function (th, col) {
      th.setAttribute("tabindex", "0");
      function sort() {
        var dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
        if (!th.hasAttribute("aria-sort") && col === 0) { dir = 1; }
        ths.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var bodies = Array.prototype.slice.call(table.tBodies);
        if (bodies.length > 1 || table.classList.contains("layers")) {
          bodies.sort(function (x, y) { return cmp(key(x.rows[0].cells[col]), key(y.rows[0].cells[col]), dir); });
          bodies.forEach(function (tb) {
            var ops = Array.prototype.slice.call(tb.querySelectorAll("tr.o[data-name]"));
            ops.sort(function (x, y) { return cmp(key(x.cells[col]), key(y.cells[col]), dir); });
            ops.forEach(function (r) { tb.appendChild(r); });
            var tail = tb.querySelector("tr.o.views");
            if (tail) { tb.appendChild(tail); }
            table.appendChild(tb);
          });
        } else {
          var rows = Array.prototype.slice.call(bodies[0].rows);
          rows.sort(function (x, y) { return cmp(key(x.cells[col]), key(y.cells[col]), dir); });
          rows.forEach(function (r) { bodies[0].appendChild(r); });
        }
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { sort(); } });
    });
  });
  showLevel("layer");
  document.documentElement.setAttribute("data-ready", "1");
})();
