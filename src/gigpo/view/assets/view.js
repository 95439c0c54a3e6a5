/* gigpo view: draws the report from the JSON in <script id="gigpo-data"> (no network, no libraries).
   State lives in the URL hash (#run=0&it=12&sg=5), so a link opens a run, an iteration and a step group. */
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("gigpo-data").textContent);
  var COLORS = ["#2f5fd0", "#e4572e", "#17a398", "#9b5de5", "#f4a259", "#4f772d", "#c9184a", "#3a86ff"];
  var PANELS = [
    ["sampled success", ["rollout/success_rate"]],
    ["held-out eval success", ["eval/success_rate", "eval/score"]],
    ["episode return", ["rollout/episode_return"]],
    ["valid-action rate", ["rollout/valid_action_rate"]],
    ["KL", ["loss/kl", "loss/approx_kl"]],
    ["entropy", ["loss/entropy"]],
    ["clip fraction", ["loss/clip_frac"]],
    ["mean step-group size", ["grouping/step_group/mean_size", "grouping/step_group/mean_size_per_row"]],
    ["singleton step-group fraction", ["grouping/step_group/singleton_frac"]],
    ["grouping precision / recall", ["grouping/precision", "grouping/recall"]],
    ["|A_E| and |A_S| (batch means)", ["adv/abs_episode_mean", "adv/abs_step_mean"]],
    ["seconds per phase", ["time/rollout", "time/advantages", "time/update"]]
  ];
  var state = { run: 0, it: null, sg: null }, scrolled = false;

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function fmt(v, d) {
    if (v === null || v === undefined) return "–";
    if (typeof v !== "number") return String(v);
    if (v !== 0 && Math.abs(v) < 1e-3) return v.toExponential(1);
    return v.toFixed(d === undefined ? 3 : d);
  }
  function tick(v, span) {  /* as many decimals as the axis' span needs, no more */
    var d = Math.max(0, Math.min(6, 2 - Math.floor(Math.log10(span || 1))));
    return Math.abs(v) >= 1e4 ? v.toExponential(1) : v.toFixed(d);
  }
  function shade(v, scale) {  /* green for credit, red for blame, stronger with size */
    if (v === null || v === undefined || !scale) return "";
    var a = Math.min(1, Math.abs(v) / scale) * 0.75;
    return v >= 0 ? "background: rgba(22,163,74," + a.toFixed(3) + ")" : "background: rgba(220,38,38," + a.toFixed(3) + ")";
  }
  function readHash() {
    var h = location.hash.replace(/^#/, "").split("&");
    h.forEach(function (kv) {
      var p = kv.split("=");
      if (p[0] === "run") { state.run = +p[1] || 0; state.runGiven = true; }
      if (p[0] === "it") state.it = p[1];
      if (p[0] === "sg") state.sg = p[1] === "" ? null : +p[1];
    });
  }
  function writeHash() {
    var h = "run=" + state.run + "&it=" + (state.it || "") + (state.sg !== null ? "&sg=" + state.sg : "");
    history.replaceState(null, "", "#" + h);
  }

  /* ---------------------------------------------------------------- charts */
  function chart(title, series, markers, xrange) {
    /* series: [{label, color, dash, x: [], y: [], band: [] or null}] ; markers: [{x, label}] ; xrange: [x0, x1]
       or none. Curves of one run share its whole iteration range: a metric that stops (no update after a
       collapse logs no loss) must not stretch its panel's axis differently from the others. */
    var box = el("div", { "class": "chart-box", "data-title": title }, [el("div", { "class": "ctitle", text: title })]);
    var W = 340, H = 190, L = 44, R = 8, T = 8, B = 22;
    var xs = [], ys = [];
    series.forEach(function (s) {
      s.x.forEach(function (x, i) {
        var y = s.y[i];
        if (y === null || y === undefined) return;
        xs.push(x); ys.push(y);
        if (s.band && s.band[i] !== null) { ys.push(y - s.band[i]); ys.push(y + s.band[i]); }
      });
    });
    var legend = el("div", { "class": "clegend" });
    if (!xs.length) { box.appendChild(el("div", { "class": "muted", text: "not logged" })); return box; }
    var x0 = xrange ? xrange[0] : Math.min.apply(null, xs), x1 = xrange ? xrange[1] : Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 += 0.5; y0 -= 0.5; }
    var pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad;
    function px(x) { return L + (x - x0) / (x1 - x0) * (W - L - R); }
    function py(y) { return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B); }
    var s = svg("svg", { "class": "chart", viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none" });
    for (var g = 0; g <= 4; g++) {
      var yv = y0 + (y1 - y0) * g / 4;
      s.appendChild(svg("line", { x1: L, x2: W - R, y1: py(yv), y2: py(yv), stroke: "#eef1f5" }));
      var t = svg("text", { x: L - 4, y: py(yv) + 3, "text-anchor": "end" }); t.textContent = tick(yv, y1 - y0); s.appendChild(t);
    }
    [x0, (x0 + x1) / 2, x1].forEach(function (xv) {
      var t = svg("text", { x: px(xv), y: H - 6, "text-anchor": "middle" }); t.textContent = Math.round(xv); s.appendChild(t);
    });
    (markers || []).forEach(function (m) {
      var ln = svg("line", { x1: px(m.x), x2: px(m.x), y1: T, y2: H - B, stroke: m.color || "#dc2626", "stroke-dasharray": "3,3", "class": "alert-marker" });
      var tt = svg("title"); tt.textContent = m.label; ln.appendChild(tt); s.appendChild(ln);
    });
    series.forEach(function (sr) {
      var pts = [], up = [], dn = [];
      sr.x.forEach(function (x, i) {
        var y = sr.y[i]; if (y === null || y === undefined) return;
        pts.push(px(x).toFixed(1) + "," + py(y).toFixed(1));
        if (sr.band) { var b = sr.band[i] || 0; up.push(px(x).toFixed(1) + "," + py(y + b).toFixed(1)); dn.unshift(px(x).toFixed(1) + "," + py(y - b).toFixed(1)); }
      });
      if (sr.band && up.length) s.appendChild(svg("polygon", { points: up.concat(dn).join(" "), fill: sr.color, opacity: 0.15 }));
      var single = pts.length === 1;
      if (single) { var c = pts[0].split(","); s.appendChild(svg("circle", { cx: c[0], cy: c[1], r: 3, fill: sr.color })); }
      else s.appendChild(svg("polyline", { points: pts.join(" "), fill: "none", stroke: sr.color, "stroke-width": 1.5, "stroke-dasharray": sr.dash || "", "class": "series" }));
      legend.appendChild(el("span", {}, [el("span", { "class": "swatch", style: "background:" + sr.color }), sr.label + "  "]));
    });
    var tip = el("div", { "class": "tip" });
    s.addEventListener("mousemove", function (ev) {
      var r = s.getBoundingClientRect(), xv = x0 + ((ev.clientX - r.left) / r.width * W - L) / (W - L - R) * (x1 - x0);
      var lines = [];
      series.forEach(function (sr) {
        var best = -1, bd = Infinity;
        sr.x.forEach(function (x, i) { if (sr.y[i] !== null && Math.abs(x - xv) < bd) { bd = Math.abs(x - xv); best = i; } });
        if (best >= 0) lines.push(sr.label + " @" + sr.x[best] + ": " + fmt(sr.y[best]));
      });
      tip.textContent = ""; lines.forEach(function (l) { tip.appendChild(el("div", { text: l })); });
      tip.style.display = "block"; tip.style.left = Math.min(ev.clientX - box.getBoundingClientRect().left + 12, 200) + "px"; tip.style.top = "28px";
    });
    s.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    box.appendChild(s); box.appendChild(legend); box.appendChild(tip);
    return box;
  }

  function runCurves(runs) {
    var wrap = el("div", { "class": "charts", id: "curves" });
    var its = [];
    runs.forEach(function (run) { (run.metrics.iteration || []).forEach(function (x) { if (x !== null) its.push(x); }); });
    var xrange = its.length ? [Math.min.apply(null, its), Math.max.apply(null, its)] : null;
    PANELS.forEach(function (p) {
      var series = [], markers = [];
      runs.forEach(function (run, ri) {
        var drawn = [];  /* metrics of this run equal at every point (success and score of a won/lost env) are one line */
        p[1].forEach(function (key, ki) {
          var y = run.metrics[key]; if (!y) return;
          var same = drawn.filter(function (d) { return JSON.stringify(d.y) === JSON.stringify(y); })[0];
          if (same) { same.series.label += " = " + (runs.length > 1 ? key.split("/").pop() : key); return; }
          var label = runs.length > 1 ? run.name + (p[1].length > 1 ? " " + key.split("/").pop() : "") : key;
          var sr = { label: label, color: COLORS[(ri + (runs.length > 1 ? 0 : ki)) % COLORS.length], dash: ki ? "4,3" : "", x: run.metrics.iteration, y: y };
          series.push(sr); drawn.push({ y: y, series: sr });
        });
        run.alerts.forEach(function (a) { markers.push({ x: a.iteration, label: run.name + ": " + a.kind + " — " + a.message }); });
      });
      wrap.appendChild(chart(p[0], series, markers, xrange));
    });
    return wrap;
  }

  /* ---------------------------------------------------------------- summary */
  function last(run, key) {
    var y = run.metrics[key]; if (!y) return null;
    for (var i = y.length - 1; i >= 0; i--) if (y[i] !== null) return y[i];
    return null;
  }
  function summary(runs) {
    var t = el("table", { id: "runs" }, [el("tr", {}, ["run", "algorithm", "env", "status", "iterations", "last sampled success", "last eval success", "alerts"].map(function (h) { return el("th", { text: h }); }))]);
    runs.forEach(function (r, i) {
      t.appendChild(el("tr", {}, [
        el("td", {}, [el("span", { "class": "swatch", style: "background:" + COLORS[i % COLORS.length] }), r.name]),
        el("td", { text: r.config["algorithm.name"] || "?" }), el("td", { text: r.config["env.name"] || "?" }),
        el("td", { text: r.status }), el("td", { "class": "num", text: r.iterations_done + " / " + (r.iterations_planned || "?") }),
        el("td", { "class": "num", text: fmt(last(r, "rollout/success_rate"), 2) }), el("td", { "class": "num", text: fmt(last(r, "eval/success_rate"), 2) }),
        el("td", { "class": "num", text: String(r.alerts.length) })]));
    });
    return t;
  }
  function configDiff(diff, runs) {
    if (!diff.length) return el("p", { "class": "muted", text: "The runs' configs are identical (apart from run_dir and seedless keys)." });
    var t = el("table", { id: "config-diff" }, [el("tr", {}, [el("th", { text: "key" })].concat(runs.map(function (r) { return el("th", { text: r.name }); })))]);
    diff.forEach(function (d) { t.appendChild(el("tr", {}, [el("td", { text: d.key })].concat(d.values.map(function (v) { return el("td", { text: JSON.stringify(v) }); })))); });
    return t;
  }
  function alertsList(runs) {
    var ul = el("ul", { "class": "alerts", id: "alerts" });
    runs.forEach(function (r) { r.alerts.forEach(function (a) {
      ul.appendChild(el("li", {}, [el("span", { "class": "alert-kind", text: a.kind }), (runs.length > 1 ? r.name + ", " : "") + "iteration " + a.iteration + ": " + a.message]));
    }); });
    return ul.childNodes.length ? ul : el("p", { "class": "muted", id: "alerts", text: "No health alerts (collapse after a solve, entropy collapse, iterations without signal)." });
  }

  /* ---------------------------------------------------------------- samples */
  function stepGroups(trajs) {
    var groups = {};
    trajs.forEach(function (t) { t.steps.forEach(function (s) {
      if (s.sg === null || s.sg === undefined || s.sg < 0) return;
      (groups[s.sg] = groups[s.sg] || []).push({ traj: t.traj, group: t.group, won: t.won, step: s });
    }); });
    return groups;
  }
  function stats(xs) {
    xs = xs.filter(function (x) { return x !== null && x !== undefined; });
    if (!xs.length) return [null, null];
    var m = xs.reduce(function (a, b) { return a + b; }, 0) / xs.length;
    var v = xs.reduce(function (a, b) { return a + (b - m) * (b - m); }, 0) / Math.max(1, xs.length - 1);
    return [m, Math.sqrt(v)];
  }
  function groupPanel(sg, members, scale) {
    var old = document.getElementById("group-panel"); if (old) old.remove();
    document.querySelectorAll("tr.hl").forEach(function (r) { r.classList.remove("hl"); });
    if (sg === null || !members) return;
    members.forEach(function (m) { var r = document.getElementById("step-" + m.traj + "-" + m.step.t); if (r) r.classList.add("hl"); });
    var R = stats(members.map(function (m) { return m.step.R; }));
    var trajs = {}; members.forEach(function (m) { trajs[m.traj] = 1; });
    var t = el("table", { "class": "steps" }, [el("tr", {}, ["traj", "t", "action", "R_t", "A_S", "A"].map(function (h) { return el("th", { text: h }); }))]);
    members.forEach(function (m) {
      t.appendChild(el("tr", { title: m.step.obs }, [el("td", { text: String(m.traj) + (m.won ? " ✓" : "") }), el("td", { "class": "num", text: String(m.step.t) }), el("td", { text: m.step.action }),
        el("td", { "class": "num", text: fmt(m.step.R) }), el("td", { "class": "num", style: shade(m.step.A_S, scale), text: fmt(m.step.A_S) }),
        el("td", { "class": "num", style: shade(m.step.A, scale), text: fmt(m.step.A) })]));
    });
    var p = el("div", { id: "group-panel" }, [
      el("button", { "class": "close", title: "close", text: "×", onclick: function () { state.sg = null; writeHash(); groupPanel(null); } }),
      el("h3", { text: "step group " + sg }),
      el("div", { text: members.length + " steps from " + Object.keys(trajs).length + " trajectories; R_t mean " + fmt(R[0]) + ", std " + fmt(R[1]) }),
      el("div", { "class": "muted", text: "A_S = (R_t − mean) / std over the group (GiGPO's step term)." }),
      el("h3", { text: "anchor state" + (members.some(function (m) { return m.step.obs !== members[0].step.obs; }) ? " (the first member's; the members' texts differ: similarity grouping — hover a row)" : "") }),
      el("pre", { text: members[0].step.obs }), t]);
    document.body.appendChild(p);
  }
  function ciCell(sc) {  /* an audit score: value [95% CI] */
    if (!sc || sc.value === null) return el("td", { "class": "num muted", text: "n/a" });
    return el("td", { "class": "num", text: fmt(sc.value) + (sc.lo === null ? "" : " [" + fmt(sc.lo) + ", " + fmt(sc.hi) + "]") });
  }
  function auditSection(runs) {  /* gigpo audit: every estimator's credit scored against Monte-Carlo A* = Q − V */
    var box = el("div", { id: "audit" }), n = 0;
    runs.forEach(function (r) { (r.audits || []).forEach(function (a) {
      n += 1;
      box.appendChild(el("h3", { text: r.name + " · checkpoint of iteration " + a.iteration + " · " + a.env + " · " + a.states + " states × " + a.continuations + " continuations" }));
      var t = el("table", { "class": "audit" }, [el("tr", {}, ["estimator", "Spearman ρ with A* [95% CI]", "sign agreement where |A*| > 2 SE [95% CI]", "clear rows", "step-signal fraction [95% CI]"].map(function (x) { return el("th", { text: x }); }))]);
      a.estimators.forEach(function (e) {
        t.appendChild(el("tr", {}, [el("td", { text: e.label }), ciCell(e.spearman), ciCell(e.sign_agreement), el("td", { "class": "num", text: e.clear_rows.value === null ? "–" : String(e.clear_rows.value) }), ciCell(e.step_signal)]));
      });
      box.appendChild(t);
    }); });
    return n ? box : null;
  }
  function branchTrees(trees) {  /* branch rollouts: each task group's tree (a row per trajectory, x = step) */
    var keys = Object.keys(trees || {});
    if (!keys.length) return null;
    var wrap = el("div", { id: "branch-trees" }, [el("h3", { text: "branch trees of this iteration (a row per trajectory; a branch leaves its parent at its branch step; green: won, red: lost)" })]);
    keys.forEach(function (g) {
      var tr = trees[g], L = 56, R = 10, T = 12, dy = 12, W = 380, H = T + tr.rows.length * dy + 14;
      var s = svg("svg", { "class": "branch-tree", width: W, height: H, "data-group": g });
      function px(x) { return L + x / Math.max(1, tr.steps) * (W - L - R); }
      var rowOf = {}; tr.rows.forEach(function (r) { rowOf[r.traj] = r.row; });
      tr.rows.forEach(function (r) {
        var y = T + r.row * dy;
        if (r.parent >= 0 && rowOf[r.parent] !== undefined) s.appendChild(svg("line", { "class": "branch", x1: px(r.x0), y1: T + rowOf[r.parent] * dy, x2: px(r.x0), y2: y, stroke: "#888" }));
        var line = svg("line", { "class": "traj-line", x1: px(r.x0), y1: y, x2: px(r.x1), y2: y, stroke: r.won ? "#2a8a4a" : "#c0392b", "stroke-width": 3 });
        var tip = svg("title", {}); tip.textContent = "trajectory " + r.traj + (r.parent >= 0 ? ", branched from " + r.parent + " at step " + r.x0 : ", a root") + ", steps " + r.x0 + "–" + (r.x1 - 1);
        line.appendChild(tip); s.appendChild(line);
        var lab = svg("text", { x: 2, y: y + 4, "font-size": 10 }); lab.textContent = "traj " + r.traj; s.appendChild(lab);
      });
      var ax = svg("text", { x: L, y: H - 2, "font-size": 10 }); ax.textContent = "step 0 … " + tr.steps; s.appendChild(ax);
      wrap.appendChild(el("div", { "class": "tree-box" }, [el("div", { "class": "muted", text: "task group " + g }), s]));
    });
    return wrap;
  }
  function samplesSection(run, ri, container) {
    container.textContent = "";
    container.setAttribute("data-run", String(ri));
    var its = run.sample_iterations || [];
    if (!its.length) { container.appendChild(el("p", { "class": "muted", text: "No samples/iter_N.jsonl in this run (train.sample_groups=0, or a run made before they existed)." })); return; }
    if (state.it === null || its.indexOf(+state.it) < 0) state.it = String(its[its.length - 1]);
    var sel = el("select", { id: "iteration", onchange: function () { state.it = sel.value; state.sg = null; writeHash(); samplesSection(run, ri, container); } });
    its.forEach(function (i) { var o = el("option", { value: String(i), text: "iteration " + i + (run.samples[String(i)] ? "" : " (not embedded)") }); if (String(i) === state.it) o.selected = true; sel.appendChild(o); });
    function step(d) { var k = its.indexOf(+state.it) + d; if (k >= 0 && k < its.length) { state.it = String(its[k]); state.sg = null; writeHash(); samplesSection(run, ri, container); } }
    container.appendChild(el("div", { "class": "controls" }, [el("button", { text: "◀", onclick: function () { step(-1); } }), sel, el("button", { text: "▶", onclick: function () { step(1); } })]));
    var s = run.samples[state.it];
    if (!s) {
      if (DATA.live) {
        container.appendChild(el("p", { "class": "muted", text: "loading iteration " + state.it + " …" }));
        fetch("samples.json?run=" + ri + "&it=" + state.it).then(function (r) { return r.json(); }).then(function (j) { run.samples[state.it] = j; samplesSection(run, ri, container); });
      } else container.appendChild(el("p", { "class": "note", text: "Iteration " + state.it + " is not embedded in this file (the report's size cap). `gigpo view RUN --serve` pages every iteration in." }));
      return;
    }
    var h = s.header || {}, trajs = s.trajectories || [];
    var scale = 0, rscale = 0;
    trajs.forEach(function (t) { t.steps.forEach(function (st) { ["A", "A_E", "A_S"].forEach(function (k) { if (st[k] !== null && st[k] !== undefined) scale = Math.max(scale, Math.abs(st[k])); }); if (st.R !== null && st.R !== undefined) rscale = Math.max(rscale, Math.abs(st.R)); if (st.reward !== null) rscale = Math.max(rscale, Math.abs(st.reward)); }); });
    container.appendChild(el("p", { "class": "muted", text: "algorithm " + h.algorithm + ", ω = " + h.step_weight + ", γ = " + h.gamma + ", grouping " + h.grouping + "; task groups " + (h.groups_written || []).join(", ") + " of " + h.groups_total + " written" + (h.truncated ? " (cut at the size cap)" : "") + ". A is the update's advantage; A_E, A_S, R_t and step groups " + (h.parts || "") + "." }));
    var groups = stepGroups(trajs);
    function open(sg) { state.sg = sg; writeHash(); groupPanel(sg, groups[sg], scale); }
    var top = h.largest_groups;  /* from the trainer: the whole batch's (exact keys) or the written groups' */
    if (!top) top = Object.keys(groups).map(function (k) {  /* an older file: the written groups' own */
      var g = groups[k], R = stats(g.map(function (m) { return m.step.R; })), tr = {};
      g.forEach(function (m) { tr[m.traj] = 1; });
      return { sg: +k, size: g.length, trajectories: Object.keys(tr).length, task_group: g[0].group, R_mean: R[0], R_std: R[1],
        abs_A_S_mean: stats(g.map(function (m) { return m.step.A_S === null ? null : Math.abs(m.step.A_S); }))[0], anchor: String(g[0].step.obs) };
    }).sort(function (a, b) { return b.size - a.size || a.sg - b.sg; }).slice(0, 10);
    if (top.length) {
      var gt = el("table", { id: "largest-groups" }, [el("tr", {}, ["step group", "size", "trajectories", "task group", "R_t mean", "R_t std", "mean |A_S|", "anchor state"].map(function (x) { return el("th", { text: x }); }))]);
      top.forEach(function (g) {
        var link = groups[g.sg] ? el("span", { "class": "sg", text: "sg " + g.sg, onclick: function () { open(g.sg); } }) : el("span", { "class": "muted", title: "its task group is not among the written ones", text: "sg " + g.sg });
        gt.appendChild(el("tr", {}, [el("td", {}, [link]), el("td", { "class": "num", text: String(g.size) }), el("td", { "class": "num", text: String(g.trajectories) }), el("td", { "class": "num", text: String(g.task_group) }),
          el("td", { "class": "num", text: fmt(g.R_mean) }), el("td", { "class": "num", text: fmt(g.R_std) }), el("td", { "class": "num", text: fmt(g.abs_A_S_mean) }),
          el("td", { title: String(g.anchor == null ? "" : g.anchor) }, [el("code", { text: String(g.anchor == null ? "" : g.anchor).replace(/\s*\n\s*/g, " / ").slice(0, 100) })])]));
      });
      container.appendChild(el("h3", { text: "largest step groups of this iteration (" + (h.largest_groups_of || "the written groups") + ")" })); container.appendChild(gt);
    }
    var bt = branchTrees(s.trees); if (bt) container.appendChild(bt);
    var list = el("div", { id: "trajectories" });
    trajs.forEach(function (t) {
      var rows = el("table", { "class": "steps" }, [el("tr", {}, ["t", "observation", "response", "action", "reward", "R_t", "A_E", "A_S", "A", "step group"].map(function (x) { return el("th", { text: x }); }))]);
      t.steps.forEach(function (st) {
        var size = st.sg !== null && st.sg !== undefined && groups[st.sg] ? groups[st.sg].length : 0;
        rows.appendChild(el("tr", { id: "step-" + t.traj + "-" + st.t, "class": "step" }, [
          el("td", { "class": "num", text: String(st.t) }), el("td", { "class": "obs" }, [el("pre", { text: st.obs })]), el("td", {}, [el("pre", { text: st.response })]),
          el("td", { "class": st.valid === false ? "invalid" : "", text: st.action }), el("td", { "class": "num", style: shade(st.reward, rscale), text: fmt(st.reward) }),
          el("td", { "class": "num", style: shade(st.R, rscale), text: fmt(st.R) }), el("td", { "class": "num", style: shade(st.A_E, scale), text: fmt(st.A_E) }),
          el("td", { "class": "num", style: shade(st.A_S, scale), text: fmt(st.A_S) }), el("td", { "class": "num", style: shade(st.A, scale), text: fmt(st.A) }),
          el("td", {}, size ? [el("span", { "class": "sg", "data-sg": String(st.sg), text: "sg " + st.sg + " (" + size + ")", onclick: function () { open(st.sg); } })] : [el("span", { "class": "muted", text: st.sg === undefined ? "" : "–" })])]));
      });
      var d = el("details", { "class": "traj " + (t.won ? "won" : "lost"), open: "" }, [el("summary", { text: "trajectory " + t.traj + " · task group " + t.group + " · seed " + t.seed + " · " + (t.won ? "won" : "lost") + " · return " + fmt(t["return"]) + " · " + t.length + " steps" + (t.task ? " · " + t.task : "") }), rows]);
      list.appendChild(d);
    });
    container.appendChild(list);
    if (state.sg !== null && groups[state.sg]) {
      groupPanel(state.sg, groups[state.sg], scale);
      if (!scrolled) {  /* a link to a step group opens on its first member (once, not on live redraws) */
        scrolled = true;
        var m = groups[state.sg][0], row = document.getElementById("step-" + m.traj + "-" + m.step.t);
        if (row && row.getBoundingClientRect().bottom > window.innerHeight) row.scrollIntoView({ block: "center" });
      }
    }
  }

  /* ---------------------------------------------------------------- sweep */
  function sweepView(app, sw) {
    app.appendChild(el("h2", { text: "final metrics (mean ± std over seeds, last " + sw.last_k + " iterations)" }));
    var t = el("table", { id: "sweep-table" }, [el("tr", {}, ["cell", "seeds"].concat(sw.final_metrics).map(function (h) { return el("th", { text: h }); }))]);
    sw.table.forEach(function (row, i) {
      t.appendChild(el("tr", {}, [el("td", {}, [el("span", { "class": "swatch", style: "background:" + COLORS[i % COLORS.length] }), row.cell]), el("td", { "class": "num", text: String(row.seeds) + (row.complete < row.seeds ? " (" + (row.seeds - row.complete) + " in progress)" : "") })].concat(sw.final_metrics.map(function (m) {
        var v = row[m]; return el("td", { "class": "num", text: v.n ? fmt(v.mean) + " ± " + fmt(v.std) + " (" + v.n + ")" : "–" });
      }))));
    });
    app.appendChild(t);
    (sw.paired || []).forEach(function (pc) { pairedView(app, pc); });
    app.appendChild(el("h2", { text: "mean curves over seeds (bands: ± 1 std)" }));
    var wrap = el("div", { "class": "charts", id: "curves" });
    var keys = {}; sw.cells.forEach(function (c) { Object.keys(c.curves).forEach(function (k) { keys[k] = 1; }); });
    Object.keys(keys).forEach(function (k) {
      wrap.appendChild(chart(k, sw.cells.filter(function (c) { return c.curves[k]; }).map(function (c, i) { return { label: c.name, color: COLORS[sw.cells.indexOf(c) % COLORS.length], x: c.curves[k].iteration, y: c.curves[k].mean, band: c.curves[k].std }; })));
    });
    app.appendChild(wrap);
  }

  function pairedView(app, pc) {  /* gigpo sweep --paired A,B: B − A per seed, recomputed from the runs */
    if (pc.note) { app.appendChild(el("div", { "class": "note", text: pc.name + ": " + pc.note })); return; }
    app.appendChild(el("h2", { text: "paired comparison (" + pc.name + "): " + pc.key + " " + pc.a + " (A) → " + pc.b + " (B)" }));
    app.appendChild(el("div", { "class": "muted", text: "per seed B − A; mean [bootstrap 95% CI]; better/worse/tie seeds; two-sided sign test. Verdict: " + pc.rule + "." }));
    var words = { "B helps": pc.b + " helps", "B hurts": pc.b + " hurts" };
    var t = el("table", { "class": "paired-table" }, [el("tr", {}, ["comparison", "metric", "seeds", "A", "B", "B − A [95% CI]", "better/worse/tie", "sign p", "verdict"].map(function (h) { return el("th", { text: h }); }))]);
    var s = el("table", { "class": "paired-seeds" }, [el("tr", {}, ["comparison", "seed", "AUC A", "AUC B", "ΔAUC", "held-out A", "held-out B", "Δheld-out", "untrained held-out A / B"].map(function (h) { return el("th", { text: h }); }))]);
    function sg(v) { return v === null || v === undefined ? "–" : (v >= 0 ? "+" : "") + fmt(v); }
    pc.comparisons.forEach(function (c) {
      var label = c.label || (pc.a + " → " + pc.b);
      Object.keys(pc.metrics).forEach(function (m) {
        var r = c.metrics[m];
        t.appendChild(el("tr", {}, [label, pc.metrics[m], String(r.seeds.length), fmt(r.mean_a), fmt(r.mean_b), sg(r.mean_diff) + " [" + sg(r.lo) + ", " + sg(r.hi) + "]", r.better + "/" + r.worse + "/" + r.ties, fmt(r.p), words[r.verdict] || r.verdict].map(function (v, j) { return el("td", { "class": j >= 2 && j < 8 ? "num" : "", text: v }); })));
      });
      var auc = c.metrics.auc, fin = c.metrics.final_eval, seeds = {};
      auc.seeds.concat(fin.seeds).forEach(function (x) { seeds[x] = 1; });
      Object.keys(seeds).map(Number).sort(function (x, y) { return x - y; }).forEach(function (seed) {
        function cols(r) { var j = r.seeds.indexOf(seed); return j < 0 ? ["–", "–", "–"] : [fmt(r.a[j]), fmt(r.b[j]), sg(r.diff[j])]; }
        var init = fmt(c.initial_eval.a[seed]) + " / " + fmt(c.initial_eval.b[seed]);
        s.appendChild(el("tr", {}, [label, String(seed)].concat(cols(auc), cols(fin), [init]).map(function (v, j) { return el("td", { "class": j ? "num" : "", text: v }); })));
      });
    });
    app.appendChild(t);
    app.appendChild(el("details", {}, [el("summary", { text: "per seed" }), s]));
  }

  /* ---------------------------------------------------------------- page */
  function render() {
    readHash();
    var app = document.getElementById("app"); app.textContent = "";
    app.appendChild(el("h1", {}, [DATA.title, DATA.live ? el("span", { "class": "live", text: "live" }) : null]));
    app.appendChild(el("div", { "class": "muted", text: "generated " + DATA.generated + (DATA.live ? " · re-read every 5 s" : "") }));
    if (DATA.kind === "sweep") { sweepView(app, DATA.sweep); return; }
    var runs = DATA.runs;
    app.appendChild(el("h2", { text: runs.length > 1 ? "runs" : "run" })); app.appendChild(summary(runs));
    runs.forEach(function (r) { r.notes.forEach(function (n) { app.appendChild(el("div", { "class": "note", text: r.name + ": " + n })); }); });
    if (runs.length > 1) { app.appendChild(el("h2", { text: "config differences" })); app.appendChild(configDiff(DATA.config_diff, runs)); }
    app.appendChild(el("h2", { text: "health alerts" })); app.appendChild(alertsList(runs));
    app.appendChild(el("h2", { text: "learning curves" })); app.appendChild(runCurves(runs));
    var au = auditSection(runs); if (au) { app.appendChild(el("h2", { text: "credit audit (gigpo audit)" })); app.appendChild(au); }
    app.appendChild(el("h2", { text: "trajectories with per-step credit" }));
    if (state.run >= runs.length) state.run = 0;
    if (!state.runGiven) {  /* no run in the link: open on the first run with step credit (A_S) to show */
      var withCredit = runs.map(function (r) { return !!r.step_credit; }).indexOf(true);
      if (withCredit >= 0) state.run = withCredit;
    }
    var holder = el("div", { id: "samples" });
    if (runs.length > 1) {
      var rs = el("select", { id: "run-select", onchange: function () { state.run = +rs.value; state.it = null; state.sg = null; writeHash(); samplesSection(runs[state.run], state.run, holder); } });
      runs.forEach(function (r, i) { var o = el("option", { value: String(i), text: r.name }); if (i === state.run) o.selected = true; rs.appendChild(o); });
      app.appendChild(el("div", { "class": "controls" }, ["run", rs]));
    }
    app.appendChild(holder);
    samplesSection(runs[state.run], state.run, holder);
    if (runs.length === 1) {
      var cfg = runs[0].config, ct = el("table", {}, []);
      Object.keys(cfg).sort().forEach(function (k) { ct.appendChild(el("tr", {}, [el("td", { text: k }), el("td", { text: JSON.stringify(cfg[k]) })])); });
      app.appendChild(el("h2", { text: "configuration" })); app.appendChild(el("details", {}, [el("summary", { text: "config.yaml (" + Object.keys(cfg).length + " keys)" }), el("div", { "class": "cfg" }, [ct])]));
    }
  }
  function signature(d) {
    return JSON.stringify((d.runs || []).map(function (r) { return [r.iterations_done, r.sample_iterations.length, r.alerts.length, r.metrics.iteration.length]; })) + (d.sweep ? JSON.stringify(d.sweep.table) + JSON.stringify(d.sweep.paired) : "");
  }
  render();
  document.body.setAttribute("data-rendered", "1");
  if (DATA.live) {
    setInterval(function () {
      fetch("data.json").then(function (r) { return r.json(); }).then(function (j) {
        if (signature(j) === signature(DATA)) return;  /* nothing new: leave the page as the reader has it */
        var keep = window.scrollY; DATA = j; DATA.live = true; render(); window.scrollTo(0, keep);
      }).catch(function () {});
    }, 5000);
  }
})();
