#include "serve/tree_view_page.h"

namespace grove::serve {

// Plain HTML, CSS, JavaScript and SVG: no build step, nothing fetched from elsewhere. The page
// subscribes to /v1/steps?id=next before it starts its own request (so it sees every step), or
// to a running request chosen from /v1/requests; each step redraws the draft tree (the accepted
// path green, rejected branches faded) and the tau and acceptance-by-depth charts.
// ?autostart=1&prompt=...&max_tokens=N&spec=TREE starts a request on load (the headless page
// test).
const char kTreeViewPage[] = R"PAGE(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>grove: live draft trees</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
#controls { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin-bottom: 8px; }
#prompt { width: 420px; }
#text { white-space: pre-wrap; background: #f6f6f6; padding: 8px; min-height: 40px; }
#text .step { border-bottom: 2px solid #8c8; margin-right: 1px; }
#tree { border: 1px solid #ddd; background: #fff; }
.node rect { fill: #eef; stroke: #99a; }
.node.accepted rect { fill: #cfc; stroke: #2a2; stroke-width: 2; }
.node.rejected { opacity: 0.35; }
.edge { stroke: #99a; }
.edge.accepted { stroke: #2a2; stroke-width: 3; }
.edge.rejected { opacity: 0.35; }
.node text { font: 12px monospace; }
.prob { fill: #666; font-size: 10px !important; }
#charts { display: flex; gap: 24px; margin-top: 8px; }
.chart { border: 1px solid #ddd; }
</style></head>
<body>
<h2>grove: the draft tree of every step, live</h2>
<div id="controls">
  <input id="prompt" value="Once upon a time">
  max tokens <input id="max_tokens" type="number" value="64" style="width:60px">
  temperature <input id="temperature" type="number" value="0" step="0.1" style="width:60px">
  tree <input id="spec" placeholder="the server's" style="width:110px">
  <button id="go">Generate and watch</button>
  or watch <select id="running"><option value="">(a running request)</option></select>
</div>
<div id="status">idle</div>
<div id="text"></div>
<svg id="tree" width="1100" height="360"></svg>
<div id="charts">
  <div>tau per step<br><svg id="tau" class="chart" width="520" height="140"></svg></div>
  <div>acceptance by depth<br><svg id="depth" class="chart" width="520" height="140"></svg></div>
</div>
<script>
"use strict";
const NS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
let source = null, taus = [], steps = 0;

function el(name, attrs, parent, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}

function shown(token) {
  return JSON.stringify(token).slice(1, -1).replace(/\u2581/g, " ");
}

function initials(names) {
  return names.split("+").map((name) => name[0]).join("+");
}

function drawTree(step) {
  const svg = $("tree");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const nodes = step.nodes, accepted = new Set(step.accepted);
  const children = nodes.map(() => []), roots = [];
  nodes.forEach((n, i) => (n.parent < 0 ? roots : children[n.parent]).push(i));
  // Leaves get rows in depth-first order; a parent sits at its children's mean row.
  const row = new Array(nodes.length);
  let next = 0;
  const place = (i) => {
    if (children[i].length === 0) { row[i] = next++; return row[i]; }
    const rows = children[i].map(place);
    row[i] = rows.reduce((a, b) => a + b, 0) / rows.length;
    return row[i];
  };
  const rootRow = roots.length ? roots.map(place).reduce((a, b) => a + b, 0) / roots.length : 0;
  const height = Math.max(360, 40 + 34 * Math.max(next, 1));
  svg.setAttribute("height", height);
  const x = (depth) => 20 + depth * 120, y = (r) => 24 + r * 34;
  const g = el("g", {}, svg);
  const edge = (x1, y1, x2, y2, ok) =>
    el("line", {x1, y1, x2, y2, class: "edge " + (ok ? "accepted" : "rejected")}, g);
  roots.forEach((i) => edge(x(0) + 60, y(rootRow), x(1), y(row[i]), accepted.has(i)));
  nodes.forEach((n, i) => children[i].forEach((c) =>
      edge(x(n.depth) + 100, y(row[i]), x(nodes[c].depth), y(row[c]), accepted.has(c))));
  const root = el("g", {class: "node accepted root"}, g);
  el("rect", {x: x(0), y: y(rootRow) - 12, width: 60, height: 24, rx: 4}, root);
  el("text", {x: x(0) + 6, y: y(rootRow) + 4}, root, "root");
  nodes.forEach((n, i) => {
    const node = el("g", {class: "node " + (accepted.has(i) ? "accepted" : "rejected"),
                          "data-depth": n.depth}, g);
    el("rect", {x: x(n.depth), y: y(row[i]) - 12, width: 100, height: 24, rx: 4}, node);
    el("text", {x: x(n.depth) + 4, y: y(row[i]) - 1}, node, shown(n.token).slice(0, 12));
    // A drafter made of several names the ones that proposed each node (initials; hover: names).
    const by = n.drafters === undefined ? "" : " " + (n.drafters ? initials(n.drafters) : "-");
    el("text", {x: x(n.depth) + 4, y: y(row[i]) + 10, class: "prob"}, node,
       n.prob.toFixed(2) + by);
    if (n.drafters !== undefined) {
      el("title", {}, node, "proposed by " + (n.drafters || "none of the drafters"));
    }
  });
}

function drawCharts(step) {
  const tau = $("tau"), depth = $("depth");
  for (const svg of [tau, depth]) while (svg.firstChild) svg.removeChild(svg.firstChild);
  const top = Math.max(2, ...taus);
  const points = taus.map((t, i) =>
      (10 + i * 500 / Math.max(1, taus.length - 1)) + "," + (130 - 120 * t / top)).join(" ");
  el("polyline", {points, fill: "none", stroke: "#36c", "stroke-width": 2}, tau);
  el("text", {x: 8, y: 14}, tau, "tau " + step.tau.toFixed(2) + " (max " + top.toFixed(1) + ")");
  const bars = step.acceptance_by_depth;
  bars.forEach((a, d) => {
    const w = 480 / Math.max(1, bars.length);
    el("rect", {x: 10 + d * w, y: 130 - 110 * a, width: w - 4, height: 110 * a, fill: "#2a2",
                class: "bar"}, depth);
    el("text", {x: 12 + d * w, y: 138, "font-size": 10}, depth, String(d + 1));
  });
}

function onStep(event) {
  const step = JSON.parse(event.data);
  if (step.choice !== 0) return;
  steps++;
  taus.push(step.tau);
  drawTree(step);
  drawCharts(step);
  const span = document.createElement("span");
  span.className = "step";
  span.textContent = step.emitted.replace(/\u2581/g, " ");
  $("text").appendChild(span);
  $("status").textContent = "step " + steps + ": " + step.nodes.length + " nodes drafted, " +
      step.accepted.length + " accepted" + (step.why ? "; " + step.why : "");
  document.body.dataset.steps = steps;
}

function watch(id, onOpen) {
  if (source) source.close();
  taus = []; steps = 0; $("text").textContent = "";
  source = new EventSource("/v1/steps?id=" + encodeURIComponent(id));
  source.addEventListener("step", onStep);
  source.addEventListener("done", () => {
    source.close();
    $("status").textContent += " (done)";
    document.body.dataset.done = "1";
  });
  source.onopen = () => { if (onOpen) { const f = onOpen; onOpen = null; f(); } };
}

async function generate() {
  watch("next", async () => {
    const body = {prompt: $("prompt").value, max_tokens: Number($("max_tokens").value),
                  temperature: Number($("temperature").value), stream: true};
    if ($("spec").value) body.grove = {speculation: $("spec").value};
    const res = await fetch("/v1/completions", {method: "POST", body: JSON.stringify(body),
                                                headers: {"Content-Type": "application/json"}});
    if (!res.ok) { $("status").textContent = "error " + res.status + ": " + await res.text(); return; }
    const reader = res.body.getReader();
    while (!(await reader.read()).done) {}  // the text arrives through the step events
  });
}

async function refreshRunning() {
  try {
    const res = await fetch("/v1/requests");
    const list = (await res.json()).data;
    const select = $("running"), chosen = select.value;
    select.length = 1;
    for (const r of list) {
      const o = document.createElement("option");
      o.value = r.id;
      o.textContent = r.id + (r.prompt ? ": " + r.prompt.slice(0, 30) : "") + " (" + r.tree + ")";
      select.appendChild(o);
    }
    select.value = chosen;
  } catch (e) {}
}

$("go").onclick = generate;
$("running").onchange = () => { if ($("running").value) watch($("running").value); };
const params = new URLSearchParams(location.search);
if (params.get("prompt")) $("prompt").value = params.get("prompt");
if (params.get("max_tokens")) $("max_tokens").value = params.get("max_tokens");
if (params.get("spec")) $("spec").value = params.get("spec");
if (params.get("autostart")) generate(); else setInterval(refreshRunning, 1000);
</script>
</body></html>
)PAGE";

}  // namespace grove::serve
