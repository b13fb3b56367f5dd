// ttfat report page: everything is drawn from the JSON in #data (voice/reports/html.py), with no network; the
// charts by uPlot, inlined before this script. A failed turn never arrives: its CDF stays short of 100 %, and it
// comes first in the table.
"use strict";

const DATA = JSON.parse(document.getElementById("data").textContent);
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"];

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  if (value === Infinity || value === "Infinity") return "∞";
  return String(Math.round(value));
}

const failed = (t) => t.status !== "ok";
const turnId = (t) => `${t.call}:${t.turn}`;
const metricLabel = Object.fromEntries(DATA.anchors.filter((a) => a.metric).map((a) => [a.metric, a.label]));
const unseen = new Set((DATA.summary || {}).unseen || []);  // a probe's run: what only the agent sees
const hasFacts = (t) => Boolean(t.reference && (t.reference.facts || []).length);
// the turns a metric is over: first fact heard, over those whose reference names facts (summary.py alike)
const over = (key, turns) => (key === "first_fact_ms" ? turns.filter(hasFacts) : turns);
// a summary's metrics that some turn has: nothing no turn could show is drawn or listed
const shownKeys = (keys, ...summaries) => keys.filter((k) => summaries.some((s) => ((s.metrics || {})[k] || {}).n));

// ---- head: the figures that matter
function head() {
  const m = DATA.summary.metrics || {};
  const card = (key, label, p50, p95, unit = " ms") =>
    el("div", { class: "card", id: `head-${key}` },
      el("div", { class: "label" }, label),
      el("div", { class: "value" },
        el("span", { class: "p50" }, p50), el("small", {}, ` p50${unit}`), " ",
        el("span", { class: "p95" }, p95), el("small", {}, " p95")));
  const cards = el("div", { class: "cards" });
  for (const key of shownKeys(DATA.headline, DATA.summary)) {
    cards.append(card(key, metricLabel[key], ms(m[key].p50), ms(m[key].p95)));
  }
  const share = DATA.summary.llm_share || {};
  const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1));
  const over = DATA.summary.talked_over || {};  // next to the latency: fast by cutting in never looks good
  if (over.of) {
    cards.append(el("div", { class: "card", id: "head-talked_over", title: over.how },
      el("div", { class: "label" }, "talked over"),
      el("div", { class: "value" }, el("span", { class: "p50" }, pct(over.rate)),
        el("small", {}, ` % of ${over.of} turns (${over.turns}; ${over.split} split)`))));
  }
  if (share.n) cards.append(card("llm_share", "LLM share of the wait", pct(share.p50), pct(share.p95), " %"));
  const ok = DATA.summary.success_rate;
  cards.append(el("div", { class: "card", id: "head-success_rate" },
    el("div", { class: "label" }, unseen.size ? "answered" : "success"),
    el("div", { class: "value" }, el("span", { class: "p50" }, ok === undefined ? "–" : (100 * ok).toFixed(1)),
      el("small", {}, ` % of ${DATA.summary.turns} turns`))));
  return cards;
}

// ---- charts (uPlot, inlined by html.py): round ticks, values on hover in the legend, drag to zoom on x,
// double-click to zoom out
const ROUND = [0, 1, 2, 3, 4, 5, 6, 7].flatMap((k) => [1, 2, 5].map((m) => m * 10 ** k));  // tick steps
const charts = {};  // by id: the tests read their ticks and legends here
const step = (span, n) => ROUND.find((s) => s >= span / n) ?? ROUND.at(-1);  // about n steps over span
const roundTop = (hi) => {  // a round end a little above hi (or above 1: no data in sight)
  const top = Math.max(1, hi), by = step(top, 10);
  return Math.ceil((1.05 * top) / by) * by;
};
const msValue = (u, v) => (v == null ? "–" : `${ms(v)} ms`);
// uPlot ranges x through this on a zoom too: only the whole of the data gets a margin
const margin = (pad) => (u, lo, hi) => (lo === u.data[0][0] && hi === u.data[0].at(-1) ? [lo - pad, hi + pad] : [lo, hi]);

function chart(id, { axes, scales = {}, x, series, ...opts }, data) {
  const box = el("div", { id });
  const axis = (label) => ({ label, incrs: ROUND, grid: { stroke: "#eee" }, ticks: { stroke: "#ccc" } });
  charts[id] = new uPlot({
    width: 520, height: 300, ...opts,
    scales: { ...scales, x: { time: false, ...scales.x } },
    axes: axes.map(axis),
    series: [x, ...series],
  }, data, box);
  return box;
}

// series: [{label, turns, key, color, dash}]; a failed turn (or one without the metric) never arrives, so its
// curve stays short of 100 %
function cdfChart(series) {
  const value = (t, key) => (failed(t) || typeof t[key] !== "number" ? Infinity : t[key]);
  const runs = series.map((s) => s.turns.map((t) => value(t, s.key)).sort((a, b) => a - b));
  const finite = runs.flat().filter(Number.isFinite);
  const xs = [...new Set([0, ...finite, roundTop(Math.max(...finite))])].sort((a, b) => a - b);  // to a round end
  const arrived = (vs) => {
    let k = 0;
    return xs.map((x) => {
      while (k < vs.length && vs[k] <= x) k++;
      return (100 * k) / Math.max(1, vs.length);
    });
  };
  const own = runs.map((vs) => vs.filter(Number.isFinite).map((v) => xs.indexOf(v)));  // a point per turn
  return chart("cdf", {
    axes: ["ms from t0 (end of the caller's speech)", "% of turns arrived"],
    x: { label: "at", value: msValue },
    scales: { y: { range: [0, 100] } },
    series: series.map((s, k) => {
      const never = runs[k].filter((v) => v === Infinity).length;
      return {
        label: s.label + (never ? ` (${never} of ${runs[k].length} never)` : ""),
        stroke: s.color, width: 2, dash: s.dash, paths: uPlot.paths.stepped({ align: 1 }),
        points: { show: true, size: 6, fill: s.color, filter: () => own[k] },
        value: (u, v) => (v == null ? "–" : `${Math.round(v)} %`),
      };
    }),
  }, [xs, ...runs.map(arrived)]);
}

// a probe's load curve (--concurrency 1,2,4): first useful audio heard at each level; never is off the chart
function curveChart(rows) {
  const ps = ["p50", "p95", "p99"];
  const at = (p) => rows.map((r) => (Number.isFinite(Number(r.first_useful_audio_ms[p])) ? Number(r.first_useful_audio_ms[p]) : null));
  return chart("curve", {
    axes: ["calls at once", "first useful audio heard (ms from t0)"],
    x: { label: "calls at once" },
    series: ps.map((p, k) => ({ label: p, stroke: COLORS[k], width: 2, points: { show: true, size: 7, fill: COLORS[k] }, value: msValue })),
  }, [rows.map((r) => r.concurrency), ...ps.map(at)]);
}

// a bar per turn, sorted by first useful audio heard, its stages stacked
function stageChart(turns) {
  const rows = turns.filter((t) => !failed(t)).sort((a, b) => a.first_useful_audio_ms - b.first_useful_audio_ms);
  const stages = DATA.stages.filter((s) => s.key !== "playing_stage_ms");
  let at = rows.map(() => 0);
  const spans = stages.map((s) => [at, (at = at.map((v, i) => v + (rows[i][s.key] || 0)))]);
  return chart("stages", {
    axes: ["turns, by first useful audio heard", "ms from t0"],
    x: {
      label: "turn",
      value: (u, v, si, i) => (i == null ? "–" : `${turnId(rows[i])}, heard at ${ms(rows[i].first_useful_audio_ms)} ms`),
    },
    scales: { x: { range: margin(0.5) }, y: { range: () => [0, roundTop(Math.max(...at))] } },
    cursor: { points: { show: false } },
    series: stages.map((s, k) => ({
      label: s.label, fill: COLORS[k], stroke: COLORS[k], points: { show: false }, value: msValue,
      paths: uPlot.paths.bars({  // from where the stage starts to where it ends
        size: [0.8, 40], disp: { y0: { values: () => spans[k][0] }, y1: { values: () => spans[k][1] } },
      }),
    })),
  }, [rows.map((t, i) => i + 1), ...stages.map((s) => rows.map((t) => t[s.key] || 0))]);
}

// x: the words of what the agent heard; from outside, of the reference (what the caller said) or of the answer
function scatterChart(turns, source) {
  const text = { transcript: (t) => t.transcript, reference: (t) => t.reference.text, answer: (t) => t.answer }[source];
  const words = (t) => (text(t) || "").split(/\s+/).filter(Boolean).length;
  const rows = turns.filter((t) => !failed(t) && typeof t.first_useful_audio_ms === "number")
    .sort((a, b) => words(a) - words(b));
  const xs = rows.map(words), wait = rows.map((t) => t.first_useful_audio_ms);
  const kinds = source === "transcript"
    ? [["no tool call", (t) => !t.tool_calls.length], ["with a tool call", (t) => t.tool_calls.length > 0]]
    : [["turns (tool calls are not seen from outside)", () => true]];
  // turns of as many words share an x: the one nearest the pointer is the one hovered
  const nearest = (u, si, i) => {
    const dist = (j) => Math.abs(u.valToPos(wait[j], "y") - u.cursor.top);
    let best = i;
    for (let j = xs.indexOf(xs[i]); xs[j] === xs[i]; j++) if (dist(j) < dist(best)) best = j;
    return best;
  };
  return chart("scatter", {
    axes: [`words in the ${source}`, "first useful audio heard, ms"],
    x: { label: "turn", value: (u, v, si, i) => (i == null ? "–" : `${turnId(rows[i])}, ${v} words`) },
    scales: { x: { range: margin(1) }, y: { range: (u, lo, hi) => [0, roundTop(hi)] } },
    cursor: { dataIdx: nearest },
    series: kinds.map(([label], k) => ({
      label, stroke: COLORS[k], paths: () => null, points: { show: true, size: 8, fill: COLORS[k] },
      value: msValue,
    })),
  }, [xs, ...kinds.map(([, has]) => rows.map((t, i) => (has(t) ? wait[i] : null)))]);
}

// ---- the table of turns
// the table's columns; what a run could not see (a probe: TTFAT, the agent's transcript and tool calls) and first
// fact heard without facts to hear are left out
const COLUMNS = [
  ["call", "call", (t) => t.call],
  ["turn", "turn", (t) => t.turn],
  ["status", "status", (t) => t.status],
  ["first_useful_audio_ms", "first useful audio ms", (t) => t.first_useful_audio_ms],
  ["first_fact_ms", "first fact ms", (t) => t.first_fact_ms],
  ["ttfat_ms", "TTFAT ms", (t) => t.ttfat_ms],
  ["transcript", "transcript", (t) => t.transcript],
  ["reference", "reference", (t) => (t.reference ? t.reference.text : "")],
  ["answer", "answer", (t) => t.answer],
  ["tools", "tool calls", (t) => t.tool_calls.map((c) => c.name).join(" ")],
].filter(([key]) => !(unseen.size && ["ttfat_ms", "transcript", "tools"].includes(key))
  && (key !== "first_fact_ms" || (DATA.turns || []).some(hasFacts)));

function toolText(c) {
  return `${c.name}(${c.arguments}) → ${JSON.stringify(c.error || c.result)} ${ms(c.ms)} ms`;
}

function cell(t, key, value) {
  if (key === "status") {
    return el("td", { class: "status" }, t.status, t.error ? el("div", { class: "error" }, t.error) : null);
  }
  if (key === "tools") return el("td", { class: "tools" }, ...t.tool_calls.map((c) => el("div", {}, toolText(c))));
  if (key.endsWith("_ms")) {
    const never = (failed(t) || (key === "first_fact_ms" && hasFacts(t))) && value == null;
    return el("td", { class: "num" }, never ? "never" : ms(value));
  }
  return el("td", {}, value === null || value === undefined ? "" : String(value));
}

function turnTable(turns) {
  const table = el("table", { id: "turns" });
  const headRow = el("tr");
  const body = el("tbody");
  let sortKey = null, sortDir = 1;
  const byDefault = (a, b) => (failed(b) - failed(a)) || a.call.localeCompare(b.call) || a.turn - b.turn;
  const status = el("select", { id: "filter-status" }, el("option", { value: "" }, "every status"),
    el("option", { value: "failed" }, "failed"),
    ...[...new Set(turns.map((t) => t.status))].map((s) => el("option", { value: s }, s)));
  const call = el("select", { id: "filter-call" }, el("option", { value: "" }, "every call"),
    ...[...new Set(turns.map((t) => t.call))].sort().map((c) => el("option", { value: c }, c)));

  function render() {
    const rows = turns.filter((t) => (!status.value || (status.value === "failed" ? failed(t) : t.status === status.value))
      && (!call.value || t.call === call.value));
    const column = COLUMNS.find((c) => c[0] === sortKey);
    rows.sort(column ? (a, b) => compare(column[2](a), column[2](b)) * sortDir : byDefault);
    body.replaceChildren();
    for (const t of rows) {
      const tr = el("tr", { class: `turn${failed(t) ? " failed" : ""}`, "data-turn": turnId(t) },
        ...COLUMNS.map(([key, , get]) => cell(t, key, get(t))));
      tr.addEventListener("click", () => toggle(t, tr));
      body.append(tr);
    }
    document.getElementById("shown").textContent = `${rows.length} of ${turns.length} turns`;
  }
  for (const [key, label] of COLUMNS) {
    const th = el("th", { "data-key": key }, label);
    th.addEventListener("click", () => {
      sortDir = sortKey === key ? -sortDir : 1;
      sortKey = key;
      for (const other of headRow.children) other.className = "";
      th.className = sortDir > 0 ? "sorted-asc" : "sorted-desc";
      render();
    });
    headRow.append(th);
  }
  status.addEventListener("change", render);
  call.addEventListener("change", render);
  table.append(el("thead", {}, headRow), body);
  const filters = el("div", { class: "filters" }, status, call, el("span", { id: "shown" }));
  return { nodes: [filters, table], render };
}

function compare(a, b) {
  const missing = (v) => v === null || v === undefined;
  if (missing(a) || missing(b)) return missing(a) - missing(b);
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
}

// ---- one turn, opened: its timeline
// round ticks (1, 2, 5 x 10^k ms apart, about six) on a hand-drawn axis from lo to hi
function ticks(svg, X, lo, hi, y) {
  const by = step(hi - lo, 6);
  for (let v = Math.ceil(lo / by) * by; v <= hi; v += by) {
    svg.append(el("svg:text", { class: "tick", x: X(v), y, "text-anchor": "middle" }, `${v} ms`));
  }
}

function toggle(t, tr) {
  const next = tr.nextElementSibling;
  if (next && next.classList.contains("turn-detail")) {
    next.remove();
    return;
  }
  tr.after(el("tr", { class: "turn-detail", "data-turn": turnId(t) }, el("td", { colspan: COLUMNS.length }, detail(t))));
}

function detail(t) {
  const anchors = DATA.anchors.filter((a) => a.metric && typeof t[a.metric] === "number")
    .map((a) => ({ name: a.name, label: a.label, v: t[a.metric] }));
  anchors.unshift({ name: "t0", label: "end of speech (t0)", v: 0 });
  if (t.barge_in_stop_ms !== undefined) anchors.push({ name: "barge_in", label: "barge-in", v: null });
  const calls = (t.llm_calls || []).filter((c) => typeof c.request_ms === "number");
  const tools = (t.tool_calls || []).filter((c) => typeof c.start_ms === "number");
  const clauses = (t.clauses || []).filter((c) => typeof c.heard_ms === "number");
  const times = [...anchors.map((a) => a.v), ...calls.map((c) => c.request_ms + (c.done_ms || 0)),
    ...tools.map((c) => c.start_ms + c.ms), ...clauses.map((c) => c.synth_ms)]
    .filter((v) => typeof v === "number" && v !== Infinity);
  const shown = times.filter((v) => v <= (t.first_useful_audio_ms || Infinity) * 1.5 || v <= 0);
  const lo = Math.min(0, ...shown), hi = Math.max(1, ...shown) * 1.05;
  const w = 900, rowH = 16, pad = { l: 150, r: 20, t: 10 };
  const rows = anchors.length + calls.length + tools.length + clauses.length;
  const h = pad.t + rows * rowH + 30;
  const svg = el("svg:svg", { width: w, height: h, class: "timeline" });
  const X = (v) => pad.l + (w - pad.l - pad.r) * (Math.min(v, hi) - lo) / (hi - lo);
  svg.append(el("svg:line", { class: "axis", x1: X(0), x2: X(0), y1: pad.t, y2: h - 24 }));
  ticks(svg, X, lo, hi, h - 8);
  // a span past the right edge is drawn as a sliver there, its times in its tooltip
  const span = (y, from, to, fill, cls, title) => svg.append(el("svg:rect", {
    x: X(from), y: y + 2, width: Math.max(1, X(to) - X(from)), height: 10, fill, class: cls }, el("svg:title", {}, title)));
  const label = (y, text) => svg.append(el("svg:text", { x: pad.l - 6, y: y + 11, "text-anchor": "end" }, text));
  let row = 0;
  for (const a of anchors) {
    const y = pad.t + row++ * rowH;
    label(y, a.label);
    if (typeof a.v === "number") {
      svg.append(el("svg:circle", { cx: X(a.v), cy: y + 7, r: 4, fill: COLORS[0], class: "anchor", "data-name": a.name },
        el("svg:title", {}, `${a.label}: ${ms(a.v)} ms`)));
    }
  }
  calls.forEach((c, i) => {
    const y = pad.t + row++ * rowH;
    const s = c.server || {};
    label(y, `LLM call ${c.round}${c.answered ? " (answer)" : ""}`);
    span(y, c.request_ms, c.request_ms + (c.done_ms || 0), COLORS[2], "llm-call",
      `request at ${ms(c.request_ms)} ms; first token +${ms(c.first_token_ms)} ms; done +${ms(c.done_ms)} ms; ` +
        `server: queue ${ms(s.queue_ms)} prefill ${ms(s.prefill_ms)} ms, ${s.forwards ?? "–"} forwards`);
    if (typeof c.first_token_ms === "number") {
      svg.append(el("svg:line", { x1: X(c.request_ms + c.first_token_ms), x2: X(c.request_ms + c.first_token_ms), y1: y, y2: y + 14, stroke: "#222" }));
    }
  });
  for (const c of tools) {
    const y = pad.t + row++ * rowH;
    label(y, `tool ${c.name}`);
    span(y, c.start_ms, c.start_ms + c.ms, COLORS[c.error ? 2 : 4], "tool",
      `${c.name}(${c.arguments}) at ${ms(c.start_ms)} ms, took ${ms(c.ms)} ms${c.error ? `; error: ${c.error}` : ""}`);
  }
  clauses.forEach((c, i) => {
    const y = pad.t + row++ * rowH;
    label(y, `clause ${i + 1}${c.filler ? " (filler)" : ""}`);
    const said = `"${c.text}"`;
    if (typeof c.synth_ms === "number" && typeof c.ready_ms === "number") {
      span(y, c.synth_ms, c.ready_ms, COLORS[5], "clause-synth", `${said}: synthesized ${ms(c.synth_ms)}–${ms(c.ready_ms)} ms`);
    }
    span(y, c.heard_ms, typeof c.end_ms === "number" ? c.end_ms : c.heard_ms, COLORS[c.filler ? 1 : 0], "clause-heard",
      `${said}: heard ${ms(c.heard_ms)}–${ms(c.end_ms)} ms`);
  });
  const sound = t.audio ? audioStrip(t.audio, anchors) : null;
  const list = el("div", { class: "anchors" }, ...anchors.map((a) => el("div", {}, `${a.label}: ${ms(a.v)} ms`)));
  const extra = [];
  const waste = t.discarded;
  if (waste) extra.push(`discarded speculative work: ASR ${waste.asr_runs} runs (${ms(waste.asr_ms)} ms), LLM ${waste.llm_runs} runs (${ms(waste.llm_ms)} ms)`);
  if (t.speculative) extra.push("answered on a transcript made before the endpoint");
  if (t.error) extra.push(`error: ${t.error}`);
  return el("div", {}, svg, sound, list, ...extra.map((x) => el("div", { class: "note" }, x)));
}

// The turn's audio (voice/record/turnaudio.py): the caller and the answer as heard, on one axis in ms from t0,
// with the anchors marked; the playhead follows the player, and a click on the strip seeks.
function audioStrip(audio, anchors) {
  const w = 900, laneH = 34, pad = { l: 150, r: 20, t: 14 };
  const h = pad.t + 2 * laneH + 26;
  const lo = audio.start_ms, hi = audio.start_ms + audio.seconds * 1000;
  const X = (v) => pad.l + (w - pad.l - pad.r) * (v - lo) / (hi - lo);
  const svg = el("svg:svg", { width: w, height: h, class: "audio-strip" });
  ["caller", "agent, as heard"].forEach((label, c) => {
    const mid = pad.t + c * laneH + laneH / 2, peaks = audio.outline[c];
    const step = audio.seconds * 1000 / Math.max(1, peaks.length);
    const d = peaks.map((p, i) => `M${X(lo + i * step).toFixed(1)},${(mid - p * laneH / 200).toFixed(1)}v${Math.max(0.5, p * laneH / 100).toFixed(1)}`).join("");
    svg.append(el("svg:text", { x: pad.l - 6, y: mid + 4, "text-anchor": "end" }, label));
    svg.append(el("svg:path", { d, stroke: COLORS[c], class: "wave" }));
  });
  for (const a of anchors) {
    if (typeof a.v !== "number" || a.v < lo || a.v > hi) continue;
    const key = a.name === "t0" || a.name === "first_useful_audio_heard";
    svg.append(el("svg:line", { class: key ? "mark key" : "mark", x1: X(a.v), x2: X(a.v), y1: pad.t - 4, y2: h - 22, "data-name": a.name },
      el("svg:title", {}, `${a.label}: ${ms(a.v)} ms`)));
    if (key) svg.append(el("svg:text", { x: X(a.v), y: pad.t - 5, "text-anchor": "middle" }, a.name === "t0" ? "t0" : "heard"));
  }
  ticks(svg, X, lo, hi, h - 8);
  const head = el("svg:line", { class: "playhead", x1: X(lo), x2: X(lo), y1: pad.t - 4, y2: h - 22 });
  svg.append(head);
  const player = el("audio", { controls: "", preload: "metadata", src: audio.src, class: "turn-audio" });
  player.addEventListener("timeupdate", () => {
    const x = X(lo + player.currentTime * 1000);
    head.setAttribute("x1", x);
    head.setAttribute("x2", x);
  });
  svg.addEventListener("click", (e) => {
    const box = svg.getBoundingClientRect();
    const v = lo + (e.clientX - box.left - pad.l) / (w - pad.l - pad.r) * (hi - lo);
    player.currentTime = Math.min(audio.seconds, Math.max(0, (v - lo) / 1000));
  });
  return el("div", { class: "audio" }, svg, player);
}

// ---- two runs: ratios, both CDFs on one plot, the turns that changed most
function ratio(a, b) {
  const bad = (v) => v === null || v === undefined || v === "Infinity" || v === Infinity;
  return bad(a) || bad(b) || a === 0 ? "–" : (b / a).toFixed(2);
}

function compareHead(runs) {
  const [A, B] = runs;
  const rows = shownKeys(DATA.headline, A.summary, B.summary)
    .map((key) => [key, metricLabel[key], A.summary.metrics[key] || {}, B.summary.metrics[key] || {}]);
  const [shareA, shareB] = [A, B].map((r) => r.summary.llm_share || {});
  if (shareA.n || shareB.n) rows.push(["llm_share", "LLM share of the wait", shareA, shareB]);
  const table = el("table", { id: "ratios" }, el("tr", {}, ...["metric", "A p50", "B p50", "B/A", "A p95", "B p95", "B/A"].map((x) => el("th", {}, x))));
  for (const [key, label, a, b] of rows) {
    const f = key === "llm_share" ? (v) => (typeof v === "number" ? (100 * v).toFixed(1) + " %" : "–") : ms;
    table.append(el("tr", { id: `ratio-${key}` }, el("td", {}, label),
      el("td", { class: "num" }, f(a.p50)), el("td", { class: "num" }, f(b.p50)), el("td", { class: "num p50" }, ratio(a.p50, b.p50)),
      el("td", { class: "num" }, f(a.p95)), el("td", { class: "num" }, f(b.p95)), el("td", { class: "num p95" }, ratio(a.p95, b.p95))));
  }
  const pct = (v) => (typeof v === "number" ? (100 * v).toFixed(1) : "–");
  for (const [key, label] of [["success_rate", "success %"]]) {
    table.append(el("tr", { id: `ratio-${key}` }, el("td", {}, label), el("td", { class: "num" }, pct(A.summary[key])),
      el("td", { class: "num" }, pct(B.summary[key]))));
  }
  const [overA, overB] = [A, B].map((r) => r.summary.talked_over || {});
  if (overA.of || overB.of) {
    table.append(el("tr", { id: "ratio-talked_over" }, el("td", {}, "talked over %"),
      el("td", { class: "num" }, pct(overA.rate)), el("td", { class: "num" }, pct(overB.rate))));
  }
  for (const [key, label] of [["wer", "WER %"], ["tool_call_accuracy", "tool calls %"], ["fact_accuracy", "answer facts %"]]) {
    const seen = [A, B].some((r) => typeof (r.summary.quality || {})[key] === "number");
    if (seen) table.append(el("tr", { id: `ratio-${key}` }, el("td", {}, label), el("td", { class: "num" }, pct((A.summary.quality || {})[key])),
      el("td", { class: "num" }, pct((B.summary.quality || {})[key]))));
  }
  return el("div", {}, el("p", {}, `A = ${A.name}`, el("br"), `B = ${B.name}`), table);
}

function changedTurns(runs) {
  const [A, B] = runs;
  const key = "first_useful_audio_ms";
  const value = (t) => (!t || failed(t) || typeof t[key] !== "number" ? Infinity : t[key]);
  const inB = new Map(B.turns.map((t) => [turnId(t), t]));
  const rows = A.turns.filter((t) => inB.has(turnId(t))).map((a) => {
    const b = inB.get(turnId(a));
    const d = value(b) - value(a);
    return { a, b, d: Number.isNaN(d) ? 0 : d, flipped: a.correct !== b.correct };
  });
  rows.sort((x, y) => (y.flipped - x.flipped) || Math.abs(y.d) - Math.abs(x.d));
  const yes = (c) => (c === null || c === undefined ? "–" : c ? "right" : "wrong");
  const table = el("table", { id: "changed" }, el("tr", {}, ...["turn", "A ms", "B ms", "B − A", "A", "B", "transcript", "A answer", "B answer"]
    .map((x) => el("th", {}, x))));
  for (const r of rows) {
    table.append(el("tr", { class: `changed${r.flipped ? " failed" : ""}`, "data-turn": turnId(r.a) },
      el("td", {}, turnId(r.a)), el("td", { class: "num" }, ms(value(r.a))), el("td", { class: "num" }, ms(value(r.b))),
      el("td", { class: "num" }, Number.isFinite(r.d) ? ms(r.d) : "∞"), el("td", { class: "status" }, yes(r.a.correct)),
      el("td", { class: "status" }, yes(r.b.correct)), el("td", {}, r.a.transcript || (r.a.reference || {}).text || ""), el("td", {}, r.a.answer), el("td", {}, r.b.answer)));
  }
  return table;
}

function compareMain() {
  const runs = DATA.compare;
  const root = document.getElementById("app");
  root.append(compareHead(runs));
  const keys = shownKeys(DATA.cdf, ...runs.map((r) => r.summary));
  const series = runs.flatMap((run, r) => keys.map((key, k) =>
    ({ label: `${"AB"[r]} ${metricLabel[key]}`, turns: over(key, run.turns), key, color: COLORS[r], dash: [null, [6, 4], [2, 3]][k] })));
  root.append(el("div", { class: "plots" }, el("div", { class: "plot" }, el("h3", {}, "CDFs of both runs (failed turns never arrive)"), cdfChart(series))));
  root.append(el("h2", {}, "Turns that changed most (correctness first, then latency)"), changedTurns(runs));
}

// ---- the page
function main() {
  if (DATA.compare) {
    compareMain();
    return;
  }
  const turns = DATA.turns;
  const root = document.getElementById("app");
  root.append(head());
  const cdf = shownKeys(DATA.cdf, DATA.summary).map((key, k) => ({ label: metricLabel[key], turns: over(key, turns), key, color: COLORS[k] }));
  // from outside the stages of the wait are not seen, nor the words the agent heard: the reference's stand in
  const source = !unseen.size ? "transcript" : turns.every((t) => t.reference) ? "reference" : "answer";
  const curve = DATA.summary.load_curve || [];
  const plots = el("div", { class: "plots" },
    curve.length ? el("div", { class: "plot" }, el("h3", {}, "load curve (failed turns never arrive)"), curveChart(curve)) : null,
    el("div", { class: "plot" }, el("h3", {}, "CDFs (failed turns never arrive)"), cdfChart(cdf)),
    unseen.size ? null : el("div", { class: "plot" }, el("h3", {}, "where the wait went, per turn"), stageChart(turns)),
    el("div", { class: "plot" }, el("h3", {}, `latency against ${source} length`), scatterChart(turns, source)));
  root.append(plots, el("h2", {}, "Turns"));
  const table = turnTable(turns);
  root.append(...table.nodes);
  table.render();
  const wanted = decodeURIComponent(location.hash.replace(/^#turn=/, ""));
  const row = [...document.querySelectorAll("tr.turn")].find((tr) => tr.dataset.turn === wanted);
  if (row) {
    row.click();
    row.scrollIntoView();
  }
}

main();
