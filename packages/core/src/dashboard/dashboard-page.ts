// The dashboard's one page: plain HTML, CSS and JavaScript with inline SVG charts, no external
// resource (it must work on a machine without internet). The script polls /api/checkpoints and
// /api/live and renders with textContent only, so nothing read from a storage is parsed as HTML.

const STYLE = `
:root { --bg:#0f1419; --panel:#171d24; --line:#2a333d; --text:#d8dee6; --muted:#8a96a3; --accent:#4fb3ff;
  --accent2:#7bd88f; --bad:#ff5f5f; --warn:#ffb454; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--text); font-size:14px; }
header { display:flex; align-items:baseline; gap:16px; padding:14px 24px; border-bottom:1px solid var(--line); background:var(--panel); }
header h1 { font-size:18px; margin:0; font-weight:600; }
header h1 span { color:var(--accent); }
header .meta { color:var(--muted); font-size:12px; }
header .status { margin-left:auto; font-size:12px; }
.badge { display:inline-block; padding:2px 8px; border-radius:10px; border:1px solid var(--line); color:var(--muted); }
.badge.live { color:var(--accent2); border-color:var(--accent2); }
.badge.off { color:var(--warn); border-color:var(--warn); }
main { padding:16px 24px 32px; display:grid; gap:16px; }
.tiles { display:grid; grid-template-columns:repeat(5, minmax(0, 1fr)); gap:12px; }
@media (max-width: 900px) { .tiles { grid-template-columns:repeat(2, minmax(0, 1fr)); } }
.tile { background:var(--panel); border:1px solid var(--line); border-radius:8px; padding:10px 14px; }
.tile .label { color:var(--muted); font-size:11px; text-transform:uppercase; letter-spacing:.04em; }
.tile .value { font-size:22px; margin-top:4px; font-variant-numeric:tabular-nums; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
.tile .value.bad { color:var(--bad); }
.grid2 { display:grid; grid-template-columns:repeat(auto-fit, minmax(420px, 1fr)); gap:16px; }
section { background:var(--panel); border:1px solid var(--line); border-radius:8px; padding:12px 14px; min-width:0; }
section h2 { font-size:13px; margin:0 0 8px; color:var(--muted); font-weight:600; text-transform:uppercase; letter-spacing:.04em; }
svg.chart { width:100%; height:200px; display:block; }
svg .grid { stroke:var(--line); stroke-width:1; }
svg .axis { fill:var(--muted); font-size:10px; }
svg .series { fill:none; stroke-width:1.5; }
svg .restart { stroke:var(--warn); stroke-dasharray:3 3; }
svg .failure-marker line { stroke:var(--bad); stroke-width:2; }
svg .failure-marker .rule { stroke-width:1; stroke-dasharray:2 3; opacity:.6; }
.legend { color:var(--muted); font-size:11px; margin-top:4px; }
.legend b { font-weight:normal; }
.legend .bad { color:var(--bad); } .legend .warn { color:var(--warn); }
table { width:100%; border-collapse:collapse; font-size:12px; font-variant-numeric:tabular-nums; }
th { text-align:left; color:var(--muted); font-weight:500; border-bottom:1px solid var(--line); padding:4px 6px; }
td { border-bottom:1px solid #1f262e; padding:4px 6px; vertical-align:top; white-space:nowrap; }
td.mono { white-space:normal; font-family: ui-monospace, Menlo, Consolas, monospace; font-size:11px; word-break:break-all; }
.empty { color:var(--muted); font-style:italic; padding:6px; }
.scroll { max-height:280px; overflow:auto; }
.note { color:var(--muted); font-size:11px; margin-top:6px; }
.err { color:var(--bad); }
`;

const SCRIPT = `
"use strict";
var COLORS = ["#4fb3ff", "#7bd88f", "#c792ea", "#ffb454", "#f07178", "#89ddff"];
var rates = [];
var latestLive = null;

function el(tag, attrs, children) {
  var node = document.createElement(tag);
  for (var key in attrs || {}) node.setAttribute(key, attrs[key]);
  (children || []).forEach(function (child) {
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}
function svg(tag, attrs, text) {
  var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (var key in attrs || {}) node.setAttribute(key, String(attrs[key]));
  if (text !== undefined) node.textContent = text;
  return node;
}
function absent(value) { return value === undefined || value === null; }
function num(value, digits) {
  if (absent(value)) return "–";
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 1 : digits });
}
function bytes(value) {
  if (absent(value)) return "–";
  var units = ["B", "KiB", "MiB", "GiB"]; var i = 0; var v = value;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(Math.round(v)) : v.toFixed(1)) + " " + units[i];
}
function ms(value) {
  if (absent(value)) return "–";
  if (value < 1000) return Math.round(value) + " ms";
  if (value < 120000) return (value / 1000).toFixed(1) + " s";
  if (value < 7200000) return (value / 60000).toFixed(1) + " min";
  return (value / 3600000).toFixed(1) + " h";
}
function clock(epochMs) {
  var d = new Date(epochMs);
  return d.toLocaleTimeString("en-GB", { hour12: false });
}
function stamp(epochMs) { return new Date(epochMs).toISOString().replace("T", " ").slice(0, 19); }
function fill(id, node) { var target = document.getElementById(id); target.replaceChildren(node); }
function table(id, cls, headers, rows, emptyText) {
  if (rows.length === 0) { fill(id, el("div", { class: "empty" }, [emptyText])); return; }
  var head = el("tr", {}, headers.map(function (h) { return el("th", {}, [h]); }));
  var body = rows.map(function (row) {
    return el("tr", { class: cls }, row.map(function (cell) {
      return typeof cell === "object" ? el("td", { class: cell.cls || "" }, [cell.text]) : el("td", {}, [cell]);
    }));
  });
  fill(id, el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)]));
}
function tile(id, value, bad) {
  var node = document.getElementById(id);
  node.textContent = value;
  node.className = "value" + (bad ? " bad" : "");
}

// A time chart: one series per scope, failure markers and restart rules on the same time axis.
function chart(id, opts) {
  var W = 640, H = 200, L = 56, R = 12, T = 10, B = 24;
  var root = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img" });
  var xs = [];
  opts.series.forEach(function (s) { s.points.forEach(function (p) { xs.push(p.x); }); });
  opts.failures.forEach(function (f) { xs.push(f.x); });
  if (xs.length === 0) { root.appendChild(svg("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" }, "no checkpoints yet")); fill(id, root); return; }
  var minX = Math.min.apply(null, xs), maxX = Math.max.apply(null, xs);
  if (maxX === minX) { minX -= 1000; maxX += 1000; }
  var maxY = 0;
  opts.series.forEach(function (s) { s.points.forEach(function (p) { maxY = Math.max(maxY, p.y); }); });
  maxY = maxY > 0 ? maxY * 1.15 : 1;
  function X(x) { return L + (x - minX) / (maxX - minX) * (W - L - R); }
  function Y(y) { return T + (1 - y / maxY) * (H - T - B); }
  for (var g = 0; g <= 4; g++) {
    var gy = maxY * g / 4;
    root.appendChild(svg("line", { x1: L, x2: W - R, y1: Y(gy), y2: Y(gy), class: "grid" }));
    root.appendChild(svg("text", { x: L - 6, y: Y(gy) + 3, class: "axis", "text-anchor": "end" }, opts.format(gy)));
  }
  [minX, (minX + maxX) / 2, maxX].forEach(function (x, i) {
    root.appendChild(svg("text", { x: X(x), y: H - 6, class: "axis", "text-anchor": i === 0 ? "start" : i === 2 ? "end" : "middle" }, clock(x)));
  });
  opts.restarts.forEach(function (r) {
    var line = svg("line", { x1: X(r.x), x2: X(r.x), y1: T, y2: H - B, class: "restart" });
    line.appendChild(svg("title", {}, r.label));
    root.appendChild(line);
  });
  opts.series.forEach(function (s, index) {
    var color = COLORS[index % COLORS.length];
    if (s.points.length > 1) {
      var d = s.points.map(function (p, i) { return (i === 0 ? "M" : "L") + X(p.x).toFixed(1) + " " + Y(p.y).toFixed(1); }).join(" ");
      root.appendChild(svg("path", { d: d, class: "series", stroke: color }));
    }
    s.points.forEach(function (p) {
      var dot = svg("circle", { cx: X(p.x), cy: Y(p.y), r: 3.2, fill: color, class: "checkpoint-point", "data-checkpoint-id": p.id, "data-scope": s.scope });
      dot.appendChild(svg("title", {}, p.label));
      root.appendChild(dot);
    });
  });
  opts.failures.forEach(function (f) {
    var x = X(f.x), y = H - B - 8;
    var mark = svg("g", { class: "failure-marker", "data-kind": f.kind });
    mark.appendChild(svg("line", { x1: x, x2: x, y1: T, y2: H - B, class: "rule" }));
    mark.appendChild(svg("line", { x1: x - 5, x2: x + 5, y1: y - 5, y2: y + 5 }));
    mark.appendChild(svg("line", { x1: x - 5, x2: x + 5, y1: y + 5, y2: y - 5 }));
    mark.appendChild(svg("title", {}, f.label));
    root.appendChild(mark);
  });
  fill(id, root);
}

function renderCheckpoints(h) {
  document.getElementById("storage").textContent = h.storage;
  var scopes = [];
  h.checkpoints.forEach(function (c) { if (scopes.indexOf(c.scope) < 0) scopes.push(c.scope); });
  function series(value) {
    return scopes.map(function (scope) {
      return { scope: scope, points: h.checkpoints.filter(function (c) { return c.scope === scope; }).map(function (c) {
        return { x: c.completedAt, y: value(c), id: c.checkpointId,
          label: "checkpoint " + c.checkpointId + " (" + c.scope + "): " + ms(c.durationMs) + ", " + bytes(c.sizeBytes) + ", " + stamp(c.completedAt) };
      }) };
    });
  }
  var failures = h.missing.map(function (m) {
    return { x: m.at, kind: "missing", label: "checkpoint " + m.checkpointId + " (" + m.scope + ") never completed" };
  });
  (h.failures || []).forEach(function (f) {
    failures.push({ x: f.at, kind: "missing", label: "checkpoint " + f.checkpointId + " (" + f.scope + ") failed: " + f.reason });
  });
  (latestLive && latestLive.failureEvents || []).forEach(function (e) {
    failures.push({ x: e.at, kind: "metric", label: e.failures + " checkpoint failure(s) " + (e.beforeFirstScrape ? "before " : "seen at ") + stamp(e.at) });
  });
  var restarts = h.checkpoints.filter(function (c) { return c.afterRestart; }).map(function (c) {
    return { x: c.triggeredAt, label: "restart or restore before checkpoint " + c.checkpointId + " (incarnation " + c.incarnation + ")" };
  });
  (h.restores || []).forEach(function (r) {
    restarts.push({ x: r.at, label: "restored checkpoint " + r.checkpointId + " (" + r.scope + ", incarnation " + r.incarnation + ")" });
  });
  document.getElementById("warning").textContent = h.warning || "";
  chart("duration-chart", { series: series(function (c) { return c.durationMs; }), failures: failures, restarts: restarts, format: ms });
  chart("size-chart", { series: series(function (c) { return c.sizeBytes; }), failures: failures, restarts: restarts, format: bytes });
  document.getElementById("legend-scopes").textContent = scopes.join(", ");

  var last = h.checkpoints[h.checkpoints.length - 1];
  tile("t-checkpoints", String(h.checkpoints.length));
  tile("t-last", last ? "#" + last.checkpointId + " · " + ms(Date.now() - last.completedAt) + " ago" : "–");
  tile("t-missing", String(h.missing.length), h.missing.length > 0);
  tile("t-incarnations", String(h.incarnations.length));

  table("history", "checkpoint-row", ["ID", "SCOPE", "COMPLETED", "DURATION", "SIZE", "INCARNATION", "LINEAGE", "FINAL"],
    h.checkpoints.slice().reverse().map(function (c) {
      return [String(c.checkpointId), c.scope, stamp(c.completedAt), ms(c.durationMs), bytes(c.sizeBytes),
        absent(c.incarnation) ? "–" : String(c.incarnation), String(c.lineage), c.isFinal ? "yes" : ""];
    }), "no completed checkpoint in the storage");
  table("incarnations", "incarnation-row", ["SCOPE", "INCARNATION", "LINEAGE", "CHECKPOINTS", "FROM", "FIRST COMPLETED"],
    h.incarnations.map(function (i) {
      return [i.scope, absent(i.incarnation) ? "–" : String(i.incarnation), String(i.lineage), String(i.checkpoints),
        "#" + i.firstCheckpointId + " – #" + i.lastCheckpointId, stamp(i.firstCompletedAt)];
    }), "no checkpoint yet");
  var events = (h.failures || []).map(function (f) { return { at: f.at, row: [stamp(f.at), "failed", "#" + f.checkpointId, f.scope, f.reason] }; })
    .concat((h.restores || []).map(function (r) { return { at: r.at, row: [stamp(r.at), "restored", "#" + r.checkpointId, r.scope, "lineage " + r.lineage + (absent(r.incarnation) ? "" : ", incarnation " + r.incarnation)] }; }));
  events.sort(function (a, b) { return b.at - a.at; });
  table("events", "event-row", ["AT", "WHAT", "CHECKPOINT", "SCOPE", "DETAIL"], events.map(function (e) { return e.row; }), "no failure or restore recorded");
  document.getElementById("claimed").textContent = h.claimedScopes.length ? "claimed scopes: " + h.claimedScopes.join(", ") : "";

  var txRows = [], splitRows = [], problems = [];
  h.latest.forEach(function (l) {
    if (l.problem) problems.push(l.scope + " #" + l.checkpointId + ": " + l.problem);
    l.transactions.forEach(function (t) {
      txRows.push([t.sink, String(t.subtaskIndex), t.kind, "#" + t.checkpointId, stamp(t.startedAt), ms(t.ageMs), bytes(t.handleBytes),
        { text: t.description || "(opaque)", cls: "mono" }]);
    });
    l.splits.forEach(function (s) { splitRows.push({ scope: l.scope, checkpointId: l.checkpointId, split: s }); });
  });
  table("transactions", "transaction-row", ["SINK", "SUBTASK", "KIND", "CHECKPOINT", "STARTED", "AGE", "HANDLE", "DESCRIPTION"],
    txRows, "no sink transaction in the latest checkpoint");
  document.getElementById("tx-note").textContent = h.latest.map(function (l) { return l.scope + ": checkpoint #" + l.checkpointId; }).join(" · ");
  var problemNode = document.getElementById("problems");
  problemNode.textContent = problems.join(" · ");
  renderSplits(splitRows);
}

var lastSplitRows = [];
function renderSplits(splitRows) {
  if (splitRows) lastSplitRows = splitRows;
  var lag = {};
  // The checkpoint keys a split as "<source uid>/<split id>"; the metrics label source and split apart.
  (latestLive && latestLive.sources || []).forEach(function (s) { lag[s.source + "/" + s.split] = s; lag[s.split] = s; });
  var seen = {};
  var rows = lastSplitRows.map(function (r) {
    seen[r.split.splitKey] = true;
    var live = lag[r.split.splitKey];
    return [r.split.splitKey, absent(r.split.subtask) ? "–" : String(r.split.subtask), { text: JSON.stringify(r.split.position), cls: "mono" },
      "#" + r.checkpointId, live ? num(live.lagRecords, 0) : "–"];
  });
  (latestLive && latestLive.sources || []).forEach(function (s) {
    if (!seen[s.source + "/" + s.split] && !seen[s.split]) rows.push([s.split, s.subtask || "–", { text: "(source " + s.source + ")", cls: "mono" }, "–", num(s.lagRecords, 0)]);
  });
  table("splits", "split-row", ["SPLIT", "SUBTASK", "POSITION IN CHECKPOINT", "CHECKPOINT", "LAG (RECORDS)"], rows, "no source split recorded");
}

function renderLive(v) {
  latestLive = v;
  var badge = document.getElementById("live");
  badge.textContent = v.available ? "live metrics · " + clock(v.scrapedAt) : "no live metrics";
  badge.className = "badge " + (v.available ? "live" : "off");
  badge.title = v.reason || "";
  tile("t-in", absent(v.recordsInPerSecond) ? (absent(v.recordsIn) ? "–" : num(v.recordsIn, 0) + " total") : num(v.recordsInPerSecond) + "/s");
  tile("t-out", absent(v.recordsOutPerSecond) ? (absent(v.recordsOut) ? "–" : num(v.recordsOut, 0) + " total") : num(v.recordsOutPerSecond) + "/s");
  tile("t-failures", num(v.checkpointFailures, 0), (v.checkpointFailures || 0) > 0);
  tile("t-restarts", num(v.restarts, 0), (v.restarts || 0) > 0);
  tile("t-skipped", num(v.recordsSkipped, 0));
  tile("t-dead", num(v.recordsDeadLettered, 0), (v.recordsDeadLettered || 0) > 0);
  if (v.available) {
    rates.push({ x: v.scrapedAt, inRate: v.recordsInPerSecond, outRate: v.recordsOutPerSecond });
    if (rates.length > 150) rates.shift();
  }
  function pts(key) { return rates.filter(function (r) { return !absent(r[key]); }).map(function (r) { return { x: r.x, y: r[key], id: "", label: num(r[key]) + "/s at " + clock(r.x) }; }); }
  chart("rate-chart", { series: [{ scope: "in", points: pts("inRate") }, { scope: "out", points: pts("outRate") }], failures: [], restarts: [], format: function (y) { return num(y, 0); } });
  table("live-sinks", "live-sink-row", ["SINK", "SUBTASK", "PENDING", "OLDEST PENDING AGE"], v.sinks.map(function (s) {
    return [s.sink, s.subtask, num(s.pendingTransactions, 0), absent(s.oldestPendingAgeSeconds) ? "–" : ms(s.oldestPendingAgeSeconds * 1000)];
  }), v.available ? "the job reports no sink transactions" : "no live metrics");
  var extra = [];
  if (v.checkpointDurationMs && v.checkpointDurationMs.mean !== null && v.checkpointDurationMs.mean !== undefined) extra.push("mean checkpoint " + ms(v.checkpointDurationMs.mean) + " over " + num(v.checkpointDurationMs.count, 0));
  if (v.sinkCommitDurationMs && !absent(v.sinkCommitDurationMs.mean)) extra.push("mean commit " + ms(v.sinkCommitDurationMs.mean));
  if (!absent(v.lastCompletedCheckpointId)) extra.push("last completed #" + v.lastCompletedCheckpointId + (absent(v.lastCompletedCheckpointAt) ? "" : " at " + clock(v.lastCompletedCheckpointAt)));
  document.getElementById("live-note").textContent = extra.join(" · ");
  renderSplits();
}

function poll() {
  var live = fetch("api/live").then(function (r) { return r.json(); }).then(renderLive).catch(function () {});
  live.then(function () { return fetch("api/checkpoints"); }).then(function (r) {
    return r.json().then(function (body) {
      if (!r.ok) throw new Error(body.error || String(r.status));
      document.getElementById("error").textContent = "";
      renderCheckpoints(body);
    });
  }).catch(function (e) { document.getElementById("error").textContent = String(e.message || e); })
    .then(function () { setTimeout(poll, 2000); });
}
poll();
`;

const BODY = `
<main>
  <div class="tiles">
    <div class="tile"><div class="label">completed checkpoints</div><div class="value" id="t-checkpoints">–</div></div>
    <div class="tile"><div class="label">latest checkpoint</div><div class="value" id="t-last">–</div></div>
    <div class="tile"><div class="label">never completed</div><div class="value" id="t-missing">–</div></div>
    <div class="tile"><div class="label">checkpoint failures</div><div class="value" id="t-failures">–</div></div>
    <div class="tile"><div class="label">restarts</div><div class="value" id="t-restarts">–</div></div>
    <div class="tile"><div class="label">incarnations</div><div class="value" id="t-incarnations">–</div></div>
    <div class="tile"><div class="label">records in</div><div class="value" id="t-in">–</div></div>
    <div class="tile"><div class="label">records out</div><div class="value" id="t-out">–</div></div>
    <div class="tile"><div class="label">skipped</div><div class="value" id="t-skipped">–</div></div>
    <div class="tile"><div class="label">dead-lettered</div><div class="value" id="t-dead">–</div></div>
  </div>
  <div class="err" id="error"></div>
  <div class="err" id="warning"></div>
  <div class="grid2">
    <section><h2>Checkpoint duration</h2><div id="duration-chart"></div>
      <div class="legend">scopes: <b id="legend-scopes"></b> · <span class="bad">✕ failed / never completed</span> · <span class="warn">┊ restart or restore</span></div></section>
    <section><h2>Checkpoint size</h2><div id="size-chart"></div>
      <div class="legend">state bytes of every subtask of the scope</div></section>
  </div>
  <div class="grid2">
    <section><h2>Records per second (live)</h2><div id="rate-chart"></div><div class="legend">blue: in · green: out</div><div class="note" id="live-note"></div></section>
    <section><h2>Pending transactions (live)</h2><div id="live-sinks"></div></section>
  </div>
  <section><h2>Sink transactions in the latest checkpoint</h2><div class="scroll" id="transactions"></div>
    <div class="note">pending: pre-committed, committed once its checkpoint completes · open: begun after it, aborted on restore · <span id="tx-note"></span></div>
    <div class="note err" id="problems"></div></section>
  <section><h2>Source splits</h2><div class="scroll" id="splits"></div></section>
  <div class="grid2">
    <section><h2>Checkpoint history</h2><div class="scroll" id="history"></div></section>
    <section><h2>Restores and incarnations</h2><div class="scroll" id="incarnations"></div><div class="note" id="claimed"></div></section>
  </div>
  <section><h2>Failures and restores</h2><div class="scroll" id="events"></div></section>
</main>`;

/**
 * The dashboard's HTML page for a job: self-contained (inline CSS, script and SVG), read-only,
 * polling the JSON endpoints next to it.
 *
 * @example
 * ```ts
 * response.end(dashboardPage("orders"));
 * ```
 */
export function dashboardPage(jobId: string): string {
  const job = escapeHtml(jobId);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>onceflow · ${job}</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<style>${STYLE}</style></head>
<body>
<header><h1>onceflow · <span>${job}</span></h1><div class="meta" id="storage"></div>
<div class="status"><span class="badge" id="live">…</span></div></header>
${BODY}
<script>${SCRIPT}</script>
</body></html>
`;
}

/**
 * The dashboard's icon (SVG): two arcs closing on a dot, "exactly once".
 *
 * @example
 * ```ts
 * response.end(DASHBOARD_FAVICON);
 * ```
 */
export const DASHBOARD_FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f2937"/><path d="M8 16a8 8 0 0 1 14-5.3M24 16a8 8 0 0 1-14 5.3" stroke="#60a5fa" stroke-width="3" fill="none" stroke-linecap="round"/><circle cx="16" cy="16" r="3" fill="#34d399"/></svg>
`;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
