// eoslab serve: draws the runs table from the JSON the page embeds, then polls /api/runs.
// State (sort column, direction, filter, verdict, the compared pair) lives in the URL's hash,
// e.g. #sort=seed&dir=desc&q=kill&v=anomalies&pair=RUN, so a link shows the same view.
// Every value from the store goes into the page as text (textContent), never as markup.
"use strict";

const COLS = [
  { key: "id", label: "run" },
  { key: "workload", label: "workload" },
  { key: "client", label: "client" },
  { key: "kafka", label: "Kafka" },
  { key: "faults", label: "faults" },
  { key: "seed", label: "seed", num: true },
  { key: "config", label: "settings" },
  { key: "started", label: "started" },
  { key: "verdict", label: "verdict" },
  { key: "anomalies", label: "anomalies" },
  { key: "links", label: "files", nosort: true },
];
const VERDICT_RANK = { broken: 0, "lab-error": 1, anomalies: 2, unknown: 3, pending: 4, valid: 5 };
const VERDICT_LABEL = { "lab-error": "lab error" };

let data = JSON.parse(document.getElementById("data").textContent);
const config = JSON.parse(document.getElementById("config").textContent);
let state = readHash();

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { sort: p.get("sort") || "id", dir: p.get("dir") === "desc" ? "desc" : "asc",
           q: p.get("q") || "", v: p.get("v") || "", pair: p.get("pair") || "" };
}

function writeHash() {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) {
    if (v && !(k === "sort" && v === "id") && !(k === "dir" && v === "asc")) p.set(k, v);
  }
  history.replaceState(null, "", "#" + p.toString());
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const k of kids) {
    if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

function link(href, text) { return el("a", { href }, text); }

function anomalyTotal(r) { return r.anomalies.reduce((n, a) => n + a.count, 0); }

function versionKey(v) {
  return String(v).split(".").map((x) => (/^\d+$/.test(x) ? x.padStart(6, "0") : x)).join(".");
}

function sortValue(r, key) {
  switch (key) {
    case "seed": return r.seed === null ? -Infinity : r.seed;
    case "kafka": return versionKey(r.kafka);
    case "verdict": return VERDICT_RANK[r.verdict] ?? 9;
    case "anomalies": return anomalyTotal(r);
    default: return String(r[key] ?? "");
  }
}

function compare(a, b) {
  const x = sortValue(a, state.sort), y = sortValue(b, state.sort);
  let c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
  if (c === 0) c = a.id.localeCompare(b.id);
  return state.dir === "desc" ? -c : c;
}

function rowText(r) {
  return { id: r.id, workload: r.workload, client: r.client + " " + r.client_version, kafka: r.kafka,
           faults: r.faults, seed: r.seed === null ? "" : String(r.seed), settings: r.config,
           config: r.config, started: r.started, verdict: r.verdict + " " + (VERDICT_LABEL[r.verdict] || ""),
           anomalies: r.anomalies.concat(r.unconfirmed).map((a) => a.type).join(" ") + " " + r.why,
           problems: r.problems.join(" ") + " " + r.notes.join(" "),
           shrink: (r.shrunk_from ? "shrunk " + r.shrunk_from : "") + (r.shrunk.length ? " original " : "") };
}

function matches(r) {
  if (state.v && r.verdict !== state.v) return false;
  const t = rowText(r);
  const all = Object.values(t).join(" ").toLowerCase();
  for (const term of state.q.toLowerCase().split(/\s+/).filter(Boolean)) {
    const i = term.indexOf(":");
    if (i > 0 && t[term.slice(0, i)] !== undefined) {
      if (!t[term.slice(0, i)].toLowerCase().includes(term.slice(i + 1))) return false;
    } else if (!all.includes(term)) {
      return false;
    }
  }
  return true;
}

function verdictCell(r) {
  return el("span", { class: "verdict v-" + r.verdict }, VERDICT_LABEL[r.verdict] || r.verdict);
}

function anomaliesCell(r) {
  const td = el("td", { class: "anoms" });
  for (const a of r.anomalies) td.append(el("span", {}, a.type + " \u00d7" + a.count));
  const why = "found in a run the lab broke: not a verdict about Kafka";
  for (const a of r.unconfirmed) {
    td.append(el("span", { class: "unconfirmed", title: why }, a.type + " \u00d7" + a.count + " (unconfirmed)"));
  }
  if (r.why) td.append(el("div", { class: "note" }, r.why));
  for (const p of r.problems) td.append(el("div", { class: "problem" }, p));
  for (const n of r.notes) td.append(el("div", { class: "note" }, n));
  return td;
}

function pairLink(shrunkId, text) {
  const a = link("#", text);
  a.addEventListener("click", (ev) => { ev.preventDefault(); state.pair = shrunkId; writeHash(); render(); });
  return a;
}

function runCell(r) {  // the id, then how it relates to a shrunk run or its original
  const td = el("td", { class: "id" }, r.id);
  if (r.shrunk_from) {
    td.append(el("div", { class: "shrink" }, "shrunk from " + r.shrunk_from + " ", pairLink(r.id, "compare")));
  }
  if (r.shrunk_from_missing) td.append(el("div", { class: "problem" }, r.shrunk_from_missing));
  for (const s of r.shrunk) td.append(el("div", { class: "shrink" }, "shrunk: " + s + " ", pairLink(s, "compare")));
  return td;
}

function linksCell(r) {
  const td = el("td");
  const parts = [];
  if (r.report) parts.push(link(r.report, "report"));
  else parts.push(el("span", { class: "muted" }, "no report"));
  if (r.results) parts.push(link(r.results, "results.json"));
  if (r.run_json) parts.push(link(r.run_json, "run.json"));
  parts.forEach((p, i) => { if (i) td.append(" \u00b7 "); td.append(p); });
  return td;
}

function timeCell(iso) {  // 2026-11-25T14:40:11Z: the date, the time below it
  const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)/.exec(iso);
  return m ? el("td", { class: "time", title: iso }, m[1], el("div", {}, m[2])) : el("td", { class: "time" }, iso);
}

function rowOf(r) {
  const client = el("td", {}, r.client, r.client_version ? el("div", { class: "ver" }, r.client_version) : null);
  return el("tr", { "data-run": r.id, "data-verdict": r.verdict },
    runCell(r), el("td", {}, r.workload), client, el("td", {}, r.kafka),
    el("td", {}, r.faults), el("td", { class: "num" }, r.seed === null ? "?" : r.seed),
    el("td", { class: "settings" }, r.config), timeCell(r.started), el("td", {}, verdictCell(r)),
    anomaliesCell(r), linksCell(r));
}

function renderHead() {
  const tr = document.getElementById("head");
  tr.replaceChildren();
  for (const c of COLS) {
    const th = el("th", { "data-key": c.key }, c.label);
    if (!c.nosort) {
      if (state.sort === c.key) th.setAttribute("aria-sort", state.dir === "asc" ? "ascending" : "descending");
      th.addEventListener("click", () => {
        state.dir = state.sort === c.key && state.dir === "asc" ? "desc" : "asc";
        state.sort = c.key;
        writeHash();
        render();
      });
    }
    tr.append(th);
  }
}

function renderSummary() {
  const s = document.getElementById("summary");
  s.replaceChildren(el("span", {}, data.runs.length + " runs"));
  for (const v of ["valid", "anomalies", "lab-error", "unknown", "pending", "broken"]) {
    if (data.counts[v]) s.append(el("span", { class: "v-" + v }, data.counts[v] + " " + (VERDICT_LABEL[v] || v)));
  }
  const m = document.getElementById("matrix");
  m.replaceChildren();
  if (data.matrix.length) {
    m.append("matrix: ");
    data.matrix.forEach((x, i) => { if (i) m.append(", "); m.append(link(x.href, x.dir)); });
  } else {
    const hint = "no matrix page in this store (eoslab analyze STORE --out STORE/matrix writes one)";
    m.append(el("span", { class: "muted" }, hint));
  }
}

const PAIR_FIELDS = [
  ["verdict", (r) => VERDICT_LABEL[r.verdict] || r.verdict],
  ["anomalies", (r) => r.anomalies.map((a) => a.type + " \u00d7" + a.count).join(", ") || "none"],
  ["faults", (r) => r.faults], ["scheduled faults", (r) => r.scheduled_faults ?? "?"],
  ["time limit (s)", (r) => r.time_limit ?? "?"], ["processes", (r) => r.concurrency ?? "?"],
  ["partitions", (r) => r.partitions ?? "?"], ["ops", (r) => r.ops ?? "?"],
  ["workload", (r) => r.workload], ["client", (r) => r.client], ["Kafka", (r) => r.kafka],
  ["settings", (r) => r.config], ["seed", (r) => r.seed ?? "?"],
];

function renderPair() {
  const sec = document.getElementById("pair");
  const shrunk = data.runs.find((r) => r.id === state.pair);
  const orig = shrunk && data.runs.find((r) => r.id === shrunk.shrunk_from);
  if (!state.pair || !orig) { sec.hidden = true; sec.replaceChildren(); return; }
  const close = link("#", "close");
  close.addEventListener("click", (ev) => { ev.preventDefault(); state.pair = ""; writeHash(); render(); });
  const tbody = el("tbody");
  for (const [name, f] of PAIR_FIELDS) {
    const a = String(f(orig)), b = String(f(shrunk));
    tbody.append(el("tr", {}, el("th", {}, name), el("td", {}, a), el("td", { class: a === b ? null : "changed" }, b)));
  }
  tbody.append(el("tr", {}, el("th", {}, "files"), linksCell(orig), linksCell(shrunk)));
  sec.replaceChildren(el("h2", {}, "shrunk run beside its original ", close),
    el("table", {}, el("thead", {}, el("tr", {}, el("th"), el("th", {}, "original: " + orig.id),
                                       el("th", {}, "shrunk: " + shrunk.id))), tbody));
  sec.hidden = false;
}

function render() {
  renderHead();
  renderSummary();
  renderPair();
  const rows = data.runs.filter(matches).sort(compare);
  document.getElementById("rows").replaceChildren(...rows.map(rowOf));
  document.getElementById("shown").textContent = rows.length + " of " + data.runs.length + " runs shown";
  const q = document.getElementById("q"), v = document.getElementById("verdict");
  if (q.value !== state.q) q.value = state.q;
  if (v.value !== state.v) v.value = state.v;
}

async function poll() {
  const live = document.getElementById("live");
  try {
    const resp = await fetch("/api/runs?since=" + encodeURIComponent(data.generation), { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const fresh = await resp.json();
    if (!fresh.unchanged && fresh.generation !== data.generation) { data = fresh; render(); }
    live.className = "live";
    live.textContent = "live: checked " + new Date().toLocaleTimeString();
  } catch (e) {
    live.className = "live down";
    live.textContent = "server unreachable (" + e.message + "); retrying";
  }
}

document.getElementById("q").addEventListener("input", (ev) => { state.q = ev.target.value; writeHash(); render(); });
document.getElementById("verdict").addEventListener("change", (ev) => {
  state.v = ev.target.value; writeHash(); render();
});
window.addEventListener("hashchange", () => { state = readHash(); render(); });
render();
if (config.refresh_s > 0) setInterval(poll, config.refresh_s * 1000);
