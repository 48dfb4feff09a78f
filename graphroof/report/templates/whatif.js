(function () {
  "use strict";
  // The what-if panel: every kernel's costs are polynomials of u = batch / b0 and v = seq / s0 (coefficients of
  // 1, u, v, uv, v^2, uv^2 per field, fitted in Python); a kernel is priced max(matrix / peak_m + vector / peak_v,
  // bytes / bandwidth, net / interconnect) as graphroof.roofline.evaluate, and the layer points move.
  var D = JSON.parse(document.getElementById("whatif-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var T = D.traced, bits = D.dtype_bits, A = D.axis;
  var chart = $("chart");

  function fmtTime(t) {
    var a = Math.abs(t);
    if (a === 0) { return "0 s"; }
    if (a >= 1) { return t.toPrecision(3) * 1 + " s"; }
    if (a >= 1e-3) { return (t * 1e3).toPrecision(3) * 1 + " ms"; }
    if (a >= 1e-6) { return (t * 1e6).toPrecision(3) * 1 + " us"; }
    return (t * 1e9).toPrecision(3) * 1 + " ns";
  }
  function fmtSI(x, unit) {
    var p = ["", "k", "M", "G", "T", "P", "E"], i = 0;
    while (Math.abs(x) >= 1000 && i < p.length - 1) { x /= 1000; i += 1; }
    return (x.toPrecision(3) * 1) + " " + p[i] + unit;
  }

  function state() {
    var b = parseInt($("wi-batch").value, 10), s = parseInt($("wi-seq").value, 10);
    return {
      b: b > 0 ? b : T.batch, s: T.seq ? (s > 0 ? s : T.seq) : 1, w: $("wi-wdtype").value,
      a: $("wi-adtype").value, tp: parseInt($("wi-tp").value, 10) || 1, dev: parseInt($("wi-device").value, 10) || 0
    };
  }

  function price(st) {
    var u = st.b / T.batch, v = T.seq ? st.s / T.seq : 1;
    var basis = [1, u, v, u * v, v * v, u * v * v];
    var dev = D.devices[st.dev], bw = dev.mem_bw_bytes_per_s, ic = dev.interconnect_bw_bytes_per_s;
    var ws = bits[st.w] / bits[T.dtype], as = bits[st.a] / bits[T.dtype], tp = st.tp;
    var out = {t: 0, tc: 0, tm: 0, tn: 0, launch: 0, allreduce: 0, flops: 0, bytes: 0, layers: {}};
    D.kernels.forEach(function (k, i) {
      var f = k.c.map(function (row) {
        var y = 0;
        for (var j = 0; j < row.length; j++) { y += row[j] * basis[j]; }
        return y;
      });
      var mm = f[0], vf = f[1], wb = f[2] * ws, ar = f[3] * as, aw = f[4] * as, kr = f[5] * as, kw = f[6] * as;
      var net = f[7];
      if (tp > 1) {
        var matrix = k.kind === "gemm" || k.kind === "attention";
        if (matrix) { mm /= tp; wb /= tp; }
        if (k.kind === "attention") {
          // two ring all-reduces per block (after attention and after the MLP), each of the attention output
          out.allreduce += ic > 0 ? 2 * (2 * (tp - 1) / tp) * aw / ic : Infinity;
          vf /= tp; ar /= tp; aw /= tp;
        }
        kr /= tp; kw /= tp;
      }
      var dt = (st.a !== T.dtype && k.dtype === T.dtype) ? st.a : k.dtype;
      var pk = dev.peaks_flops_per_s[dt] || dev.peaks_flops_per_s[k.dtype];
      var tc = mm / pk[0] + vf / pk[1];
      var nbytes = wb + ar + aw + kr + kw;
      var tm = nbytes / bw, tn = net ? (ic > 0 ? net / ic : Infinity) : 0;
      var t = Math.max(tc, tm, tn);
      out.t += t; out.tc += tc; out.tm += tm; out.tn += tn;
      out.launch += dev.t_launch_s[i] || 0;
      out.flops += mm + vf; out.bytes += nbytes;
      var li = D.kernel_layer[i];
      if (li >= 0) {
        var L = out.layers[li] || (out.layers[li] = {flops: 0, bytes: 0, t: 0, tc: 0, tm: 0, tn: 0});
        L.flops += mm + vf; L.bytes += nbytes; L.t += t; L.tc += tc; L.tm += tm; L.tn += tn;
      }
    });
    out.t += out.allreduce; out.tn += out.allreduce;
    return out;
  }

  function bound(tc, tm, tn) {
    if (tn > tc && tn > tm) { return "network"; }
    if (tc === 0 && tm === 0) { return "memory"; }
    return tc >= tm ? "compute" : "memory";
  }

  var points = {};
  if (chart) {
    chart.querySelectorAll("g.pts[data-level=layer] circle.pt:not(.strip)").forEach(function (el) {
      points[el.getAttribute("data-name")] = el;
    });
  }
  function X(ai) {
    var x = A.left + (Math.log10(ai) - A.x0) / (A.x1 - A.x0) * A.pw;
    return Math.min(Math.max(x, A.left), A.left + A.pw);
  }
  function Y(perf) {
    var y = A.top + (A.y1 - Math.log10(Math.max(perf, Math.pow(10, A.y0)))) / (A.y1 - A.y0) * A.ph;
    return Math.max(y, A.top);
  }

  function update() {
    var st = state(), r = price(st);
    var moved = st.b !== T.batch || (T.seq && st.s !== T.seq) || st.w !== T.dtype || st.a !== T.dtype ||
      st.tp !== 1 || st.dev !== 0;
    if (!isFinite(r.t)) {  // TP or a collective on a device whose profile lists no interconnect bandwidth
      $("wi-t").textContent = "not priced: " + D.devices[st.dev].label + " lists no interconnect bandwidth";
      $("wi-t").setAttribute("data-v", "");
      ["wi-tl", "wi-parts", "wi-bound", "wi-work"].forEach(function (id) { $(id).textContent = "-"; });
      return;
    }
    $("wi-t").textContent = fmtTime(r.t);
    $("wi-t").setAttribute("data-v", String(r.t));
    $("wi-tl").textContent = fmtTime(r.t + r.launch) + " (launches " + fmtTime(r.launch) + ")";
    $("wi-tl").setAttribute("data-v", String(r.t + r.launch));
    $("wi-parts").textContent = fmtTime(r.tc) + " / " + fmtTime(r.tm) + " / " + fmtTime(r.tn) +
      (st.tp > 1 ? " (all-reduce " + fmtTime(r.allreduce) + ")" : "");
    var b = bound(r.tc, r.tm, r.tn);
    $("wi-bound").innerHTML = "";
    var el = document.createElement("b");
    el.className = "b-" + b;
    el.textContent = b + "-bound";
    $("wi-bound").appendChild(el);
    $("wi-work").textContent = fmtSI(r.flops, "FLOP") + " / " + fmtSI(r.bytes, "B") +
      (r.bytes ? " (" + (r.flops / r.bytes).toPrecision(3) + " FLOP/B)" : "");
    if (chart) {
      chart.classList.toggle("wi-moved", !!moved);
      chart.classList.toggle("wi-stale", st.dev !== 0);
      D.layers.forEach(function (name, i) {
        var p = points[name], L = r.layers[i];
        if (!p || !L || !L.flops || !L.bytes || !L.t) { return; }
        p.setAttribute("cx", X(L.flops / L.bytes).toFixed(1));
        p.setAttribute("cy", Y(L.flops / L.t).toFixed(1));
        p.classList.remove("compute", "memory", "network");
        p.classList.add(bound(L.tc, L.tm, L.tn));
      });
    }
    document.documentElement.setAttribute("data-whatif", String(r.t));
  }

  ["wi-batch", "wi-seq", "wi-wdtype", "wi-adtype", "wi-tp", "wi-device"].forEach(function (id) {
    $(id).addEventListener("input", update);
    $(id).addEventListener("change", update);
  });
  $("wi-reset").addEventListener("click", function () {
    $("wi-batch").value = T.batch;
    $("wi-seq").value = T.seq || "";
    $("wi-wdtype").selectedIndex = 0; $("wi-adtype").selectedIndex = 0;
    $("wi-tp").selectedIndex = 0; $("wi-device").selectedIndex = 0;
    update();
  });
  update();
}());
