// The dashboard's page: one self-contained document (no request for a script, style or font
// leaves for another host, so it works on a cluster without a way out and its CSP can forbid
// everything else). It reads the run's state from /events with the token of its own address,
// and draws with the DOM only (textContent: names and reasons never become markup).
//
// For scripts that drive it (the browser test): each state drawn is window.fiberState, followed
// by a `fiber-update` event; window.fiberWhen(pred) resolves once a drawn state satisfies pred.
#include "runtime/observe/dashboard.hpp"

namespace fiber::detail {

std::string_view dashboard_page() {
  static constexpr std::string_view page = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fiber run</title>
<style>
  :root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --card:#fff; --accent:#2f6fde; --bad:#c4320a; --ok:#027a48; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; gap: 16px; align-items: baseline; padding: 14px 20px; background: var(--card); border-bottom: 1px solid var(--line); }
  header h1 { font-size: 17px; margin: 0; }
  header .muted { color: var(--muted); }
  #status { margin-left: auto; font-weight: 600; }
  #status.live { color: var(--ok); } #status.gone { color: var(--bad); }
  main { padding: 16px 20px; display: grid; gap: 16px; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(120px, 1fr)); gap: 10px; }
  .tile { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
  .tile .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
  .tile .value { font-size: 24px; font-variant-numeric: tabular-nums; }
  section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
  section h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 4px 8px; border-top: 1px solid var(--line); }
  th { color: var(--muted); font-weight: 500; font-size: 12px; border-top: none; }
  .state-busy { color: var(--accent); } .state-starting, .state-waiting { color: #b54708; } .state-leaving { color: var(--muted); }
  .failures li { color: var(--bad); }
  .failures li.none, .none { color: var(--muted); }
  svg { width: 100%; height: 180px; display: block; }
  .legend span { margin-right: 14px; font-size: 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; vertical-align: -1px; }
</style>
</head>
<body>
<header>
  <h1>fiber run <span id="run">…</span></h1>
  <span class="muted" id="program"></span>
  <span class="muted" id="backend"></span>
  <span class="muted">up <span id="uptime">0</span> s</span>
  <span id="status">connecting</span>
</header>
<main>
  <div class="tiles">
    <div class="tile"><div class="label">queued</div><div class="value" id="total-queued">0</div></div>
    <div class="tile"><div class="label">running</div><div class="value" id="total-running">0</div></div>
    <div class="tile"><div class="label">done</div><div class="value" id="total-done">0</div></div>
    <div class="tile"><div class="label">retried</div><div class="value" id="total-retried">0</div></div>
    <div class="tile"><div class="label">done / s</div><div class="value" id="rate-done">0</div></div>
    <div class="tile"><div class="label">retried / s</div><div class="value" id="rate-retried">0</div></div>
    <div class="tile"><div class="label">workers</div><div class="value" id="total-workers">0</div></div>
    <div class="tile"><div class="label">workers lost</div><div class="value" id="total-workers_lost">0</div></div>
  </div>
  <section>
    <h2>Throughput</h2>
    <div class="legend"><span><i style="background:#2f6fde"></i>items done / s</span><span><i style="background:#c4320a"></i>retried / s</span><span><i style="background:#98a2b3"></i>running</span></div>
    <svg id="plot" viewBox="0 0 800 180" preserveAspectRatio="none" role="img" aria-label="items done per second over time"></svg>
    <div class="muted" id="plot-scale"></div>
  </section>
  <div id="pools"></div>
  <section>
    <h2>Processes <span class="muted" id="processes-count"></span></h2>
    <table><thead><tr><th>name</th><th>pid</th><th>state</th><th>resources</th><th>memory</th><th>raised</th></tr></thead><tbody id="processes"></tbody></table>
  </section>
</main>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
};
const fmt = (x) => (typeof x === "number" && !Number.isInteger(x)) ? x.toFixed(x < 10 ? 1 : 0) : String(x);
const set = (id, v) => { const e = $(id); if (e) e.textContent = fmt(v); };

function cell(row, text, cls) { const td = el("td", cls ? {class: cls} : {}); td.textContent = text; row.append(td); }

function drawPlot(history) {
  const svg = $("plot"), W = 800, H = 180, pad = 4;
  svg.replaceChildren();
  if (history.length < 2) return;
  const t0 = history[0][0], t1 = history[history.length - 1][0];
  const top = Math.max(1, ...history.map(p => Math.max(p[1], p[2], p[3])));
  const x = (t) => pad + (W - 2 * pad) * (t - t0) / Math.max(1e-9, t1 - t0);
  const y = (v) => H - pad - (H - 2 * pad) * v / top;
  const line = (i, color) => {
    const pts = history.map(p => x(p[0]).toFixed(1) + "," + y(p[i]).toFixed(1)).join(" ");
    const pl = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    pl.setAttribute("points", pts);
    pl.setAttribute("fill", "none");
    pl.setAttribute("stroke", color);
    pl.setAttribute("stroke-width", "2");
    pl.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(pl);
  };
  line(3, "#98a2b3"); line(2, "#c4320a"); line(1, "#2f6fde");
  $("plot-scale").textContent = "top: " + fmt(top) + "   last " + fmt(t1 - t0) + " s";
}

function drawPool(p) {
  const id = "pool-" + p.id;
  const s = el("section", {id});
  const h = el("h2");
  h.textContent = "Pool " + (p.in ? p.number + " in " + p.in : p.id) + " ";
  const st = el("span", {class: "muted", id: id + "-state"});
  st.textContent = p.state + " · " + p.target + " workers asked for";
  h.append(st);
  s.append(h);
  const stats = el("table");
  const names = ["queued", "running", "done", "retried", "workers", "workers_started", "workers_lost"];
  const head = el("tr"), vals = el("tr");
  for (const n of names) {
    const th = el("th"); th.textContent = n.replace("_", " "); head.append(th);
    const td = el("td", {id: id + "-" + n}); td.textContent = fmt(p.stats[n]); vals.append(td);
  }
  stats.append(el("thead", {}, head), el("tbody", {}, vals));
  s.append(stats);

  const wt = el("table", {id: id + "-worker-table"});
  const wh = el("tr");
  for (const n of ["worker", "pid", "state", "items held", "items done", "why"]) { const th = el("th"); th.textContent = n; wh.append(th); }
  const wb = el("tbody");
  for (const w of p.workers) {
    const r = el("tr", {"data-worker": w.name});
    cell(r, w.name); cell(r, w.pid ? String(w.pid) : "—"); cell(r, w.state, "state-" + w.state);
    cell(r, String(w.items)); cell(r, String(w.done)); cell(r, w.pending || "");
    wb.append(r);
  }
  wt.append(el("thead", {}, wh), wb);
  const more = p.workers_shown < p.workers_total ? " (" + p.workers_shown + " of " + p.workers_total + " shown)" : "";
  const wtitle = el("h2"); wtitle.textContent = "Workers" + more;
  s.append(wtitle, wt);

  const ft = el("h2"); ft.textContent = "Failures";
  const fl = el("ul", {class: "failures", id: id + "-failures"});
  if (!p.failures.length) { const li = el("li", {class: "none"}); li.textContent = "none"; fl.append(li); }
  for (const f of p.failures) { const li = el("li"); li.textContent = fmt(f.at_s) + " s  " + f.what; fl.append(li); }
  s.append(ft, fl);
  return s;
}

function draw(s) {
  set("run", s.run); set("program", s.program); set("backend", s.backend); set("uptime", Math.round(s.uptime_s));
  for (const [k, v] of Object.entries(s.totals)) set("total-" + k, v);
  set("rate-done", s.rates.done_per_s); set("rate-retried", s.rates.retried_per_s);
  drawPlot(s.history);
  $("pools").replaceChildren(...s.pools.map(drawPool));
  const rows = s.processes.list.map(p => {
    const r = el("tr", {"data-process": p.name});
    cell(r, p.name); cell(r, String(p.pid || "—")); cell(r, p.state); cell(r, p.resources || ""); cell(r, p.memory || ""); cell(r, p.raised || "");
    return r;
  });
  $("processes").replaceChildren(...rows);
  $("processes-count").textContent = s.processes.running + " running, " + s.processes.ended + " ended";
  window.fiberState = s;
  window.dispatchEvent(new CustomEvent("fiber-update"));
}

window.fiberWhen = (pred) => new Promise((resolve) => {
  if (window.fiberState && pred(window.fiberState)) return resolve(window.fiberState);
  const on = () => { if (pred(window.fiberState)) { window.removeEventListener("fiber-update", on); resolve(window.fiberState); } };
  window.addEventListener("fiber-update", on);
});

const events = new EventSource("events?token=" + encodeURIComponent(token));
events.onopen = () => { $("status").textContent = "live"; $("status").className = "live"; };
events.onerror = () => { $("status").textContent = "disconnected (the run ended?)"; $("status").className = "gone"; };
events.onmessage = (e) => draw(JSON.parse(e.data));
</script>
</body>
</html>
)html";
  return page;
}

}  // namespace fiber::detail
