// harnessctl view: renders the store's JSON API. Every string that came from the store
// (harness output, model replies, task text, names) is untrusted: it only ever becomes a
// DOM text node (el() below); nothing is parsed as HTML.
"use strict";

const POLL_MS = 2000;
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "href") node.setAttribute("href", safeHref(value));
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

function safeHref(value) {
  const text = String(value);
  return text.startsWith("#") ? text : "#";  // only in-page links
}

function text(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

async function getJSON(path) {
  const response = await fetch(path, {headers: {"Accept": "application/json"}});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function pct(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%"; }
function when(t) { return t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "-"; }

function table(headers, rows, id) {
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  return el("table", {id: id}, el("thead", {}, head), el("tbody", {}, ...rows));
}

function setMain(view, ...children) {
  const main = document.getElementById("main");
  main.replaceChildren(...children);
  main.setAttribute("data-view", view);
}

function markLive() {
  document.getElementById("live").textContent = "live: polled " + new Date().toLocaleTimeString();
}

function parseHash() {
  const hash = decodeURIComponent(location.hash.slice(1));
  const [name, rest] = hash.split("?");
  const params = new URLSearchParams(rest || "");
  if (name.startsWith("rollout=")) return {view: "rollout", id: name.slice(8)};
  if (name.startsWith("pair=")) return {view: "pair", ids: name.slice(5).split(",").slice(0, 2)};
  return {view: name || "runs", params: params};
}

// --- runs ---------------------------------------------------------------------------------

function runRow(r) {
  return el("tr", {"data-run": r.id},
    el("td", {}, el("input", {type: "radio", name: "a", value: r.id, title: "A"}),
      el("input", {type: "radio", name: "b", value: r.id, title: "B"})),
    el("td", {}, el("a", {href: "#rollouts?run=" + encodeURIComponent(r.id)}, r.id.slice(0, 12))),
    el("td", {}, when(r.started_at)), el("td", {}, r.command), el("td", {}, r.harness),
    el("td", {}, r.suite + "/" + r.split), el("td", {}, r.policy),
    el("td", {"class": "status"}, r.status), el("td", {"class": "num"}, r.rollouts),
    el("td", {"class": "num"}, pct(r.success_rate)),
    el("td", {"class": "num"}, r.cost_usd.toFixed(4)));
}

async function showRuns() {
  const data = await getJSON("/api/runs");
  const main = document.getElementById("main");
  const existing = main.getAttribute("data-view") === "runs" && document.getElementById("runs-table");
  const headers = ["A B", "run", "started", "command", "harness", "suite/split", "policy",
    "status", "rollouts", "success", "cost $"];
  const fresh = table(headers, data.runs.map(runRow), "runs-table");
  if (existing) {  // a poll: keep the A/B choice
    const chosen = {};
    for (const input of existing.querySelectorAll("input:checked")) chosen[input.name] = input.value;
    existing.replaceWith(fresh);
    for (const input of fresh.querySelectorAll("input")) {
      if (chosen[input.name] === input.value) input.checked = true;
    }
  } else {
    const button = el("button", {id: "compare-button", type: "button"}, "compare A and B");
    button.addEventListener("click", () => {
      const a = document.querySelector("#runs-table input[name=a]:checked");
      const b = document.querySelector("#runs-table input[name=b]:checked");
      if (a && b) location.hash = "compare?a=" + encodeURIComponent(a.value) + "&b=" + encodeURIComponent(b.value);
    });
    setMain("runs", el("h2", {}, "Runs"), button, fresh);
  }
  markLive();
}

// --- comparing two runs ---------------------------------------------------------------------

async function showCompare(params) {
  const data = await getJSON("/api/compare?" + params.toString());
  const side = (label, r) => el("p", {}, label + ": " + r.harness + ", run " + r.id.slice(0, 12) +
    " " + r.suite + "/" + r.split + " " + r.policy + " (" + r.status + ")");
  const summary = el("p", {id: "compare-summary"}, data.pairs + " pairs: A " +
    pct(data.a_usage.success_rate) + " -> B " + pct(data.b_usage.success_rate) + " (" +
    (100 * data.delta).toFixed(1) + " points); rescues " + data.rescues + ", regressions " +
    data.regressions + "; sign test p(B better) " + data.p_b_better.toPrecision(3) +
    ", two-sided " + data.p_two_sided.toPrecision(3));
  const cats = Object.entries(data.categories).map(([name, c]) => el("tr", {},
    el("td", {}, name), el("td", {"class": "num"}, c.pairs), el("td", {"class": "num"}, c.a_successes),
    el("td", {"class": "num"}, c.b_successes), el("td", {"class": "num"}, (100 * c.delta).toFixed(1)),
    el("td", {"class": "num"}, c.rescues), el("td", {"class": "num"}, c.regressions)));
  const changes = data.changes.map((c) => el("tr", {"data-change": c.change},
    el("td", {}, c.change), el("td", {}, c.task), el("td", {"class": "num"}, c.seed),
    el("td", {}, c.a_outcome), el("td", {}, c.b_outcome),
    el("td", {}, el("a", {href: "#pair=" + c.a_rollout + "," + c.b_rollout}, "side by side"))));
  setMain("compare", el("h2", {}, "Compare"), side("A", data.a), side("B", data.b), summary,
    table(["category", "pairs", "A", "B", "delta", "rescues", "regressions"], cats, "compare-categories"),
    el("h3", {}, "Changed pairs"),
    table(["change", "task", "seed", "A", "B", ""], changes, "compare-changes"));
}

// the first model call at which two trajectories differ: {index, what} (what: "context",
// the messages sent; "reply"; "length", one has no such call), or null when they agree
function firstDivergence(a, b) {
  const ca = a.trajectory ? a.trajectory.calls : [], cb = b.trajectory ? b.trajectory.calls : [];
  for (let i = 0; i < Math.max(ca.length, cb.length); i++) {
    const x = ca[i], y = cb[i];
    if (!x || !y) return {index: i, what: "length"};
    if (JSON.stringify(x.messages) !== JSON.stringify(y.messages)) return {index: i, what: "context"};
    if (x.reply !== y.reply) return {index: i, what: "reply"};
  }
  return null;
}

async function showPair(ids) {
  const [a, b] = await Promise.all(ids.map((id) => getJSON("/api/rollouts/" + encodeURIComponent(id))));
  const split = firstDivergence(a, b);
  const column = (label, data) => {
    const r = data.rollout;
    const calls = data.trajectory ? data.trajectory.calls.map(callSection) : [el("p", {"class": "error"}, data.error)];
    if (split && calls[split.index]) calls[split.index].classList.add("diverged");
    return el("div", {"class": "column", "data-side": label},
      el("h3", {}, label + ": " + r.harness + ", " + r.outcome),
      el("p", {"class": "meta"}, el("a", {href: "#rollout=" + r.id}, r.id.slice(0, 12))), ...calls);
  };
  const said = {context: "the messages sent differ", reply: "the replies differ",
    length: "one trajectory has no such call"};
  const banner = el("p", {id: "divergence", "class": "meta"}, split === null
    ? "The two trajectories make the same calls with the same replies."
    : "First divergence: model call " + split.index + " (" + said[split.what] + "); marked below.");
  setMain("pair", el("h2", {}, a.rollout.task + " (seed " + a.rollout.seed + ")"), banner,
    el("div", {"class": "pair"}, column("A", a), column("B", b)));
  const marked = document.querySelector(".diverged");
  if (marked) marked.scrollIntoView({block: "start"});
}

// --- rollouts -----------------------------------------------------------------------------

function rolloutRow(r, live) {
  const cls = r.success ? "outcome-success" : "outcome-other";
  return el("tr", {"data-rollout": r.id, "data-live": live ? "1" : null},
    el("td", {}, el("a", {href: "#rollout=" + r.id}, r.id.slice(0, 12))),
    el("td", {}, r.harness), el("td", {}, r.task), el("td", {}, r.category),
    el("td", {"class": "num"}, r.seed), el("td", {}, r.policy),
    el("td", {"class": cls}, r.outcome), el("td", {"class": "num"}, r.steps),
    el("td", {"class": "num"}, r.model_calls), el("td", {"class": "num"}, r.cost_usd.toFixed(4)),
    el("td", {}, when(r.created_at)));
}

function filterForm(params) {
  const field = (name) => el("label", {}, name + " ",
    el("input", {name: name, value: params.get(name) || "", size: 14}));
  const form = el("form", {"class": "filters", id: "filters"},
    field("harness"), field("task"), field("outcome"), field("run"),
    el("button", {type: "submit"}, "filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const input of form.querySelectorAll("input")) {
      if (input.value) query.set(input.name, input.value);
    }
    location.hash = "rollouts?" + query.toString();
  });
  return form;
}

async function showRollouts(params) {
  const query = new URLSearchParams(params);
  const data = await getJSON("/api/rollouts?" + query.toString());
  const headers = ["rollout", "harness", "task", "category", "seed", "policy", "outcome",
    "steps", "calls", "cost $", "at"];
  const body = table(headers, data.rollouts.map((r) => rolloutRow(r, false)), "rollouts-table");
  const count = el("p", {id: "rollout-count", "class": "meta"}, data.total + " rollouts");
  setMain("rollouts", el("h2", {}, "Rollouts"), filterForm(params), count, body);
  let newest = data.rollouts.length ? data.rollouts[0].created_at : 0;
  let total = data.total;
  markLive();
  timer = setInterval(async () => {
    query.set("since", String(newest));
    const fresh = await getJSON("/api/rollouts?" + query.toString());
    const tbody = body.querySelector("tbody");
    for (const r of fresh.rollouts.slice().reverse()) {
      if (tbody.querySelector('tr[data-rollout="' + CSS.escape(r.id) + '"]')) continue;
      tbody.insertBefore(rolloutRow(r, true), tbody.firstChild);
      newest = Math.max(newest, r.created_at);
      total += 1;
    }
    count.textContent = total + " rollouts";
    markLive();
  }, POLL_MS);
}

// --- one trajectory -----------------------------------------------------------------------

function block(label, value) {
  return el("div", {}, el("div", {"class": "meta"}, label), el("pre", {}, text(value)));
}

function systemPrompt(c) {
  const m = (c && c.messages || []).find((x) => x && x.role === "system");
  return m ? text(m.content ?? "") : null;
}

// a call's section; a system prompt equal to the previous call's is folded (``all``: the
// trajectory's calls, as Array.map passes them)
function callSection(c, i, all) {
  const head = "model call " + c.index + ": " + c.model + " (" + c.status + ", " +
    c.prompt_tokens + "+" + c.completion_tokens + " tokens, $" + c.cost_usd.toFixed(4) + ")";
  const parts = [el("h3", {}, head)];
  const before = i > 0 && all ? systemPrompt(all[i - 1]) : null;
  for (const m of c.messages) {
    if (m && m.role === "system" && before !== null && text(m.content ?? "") === before) {
      parts.push(el("details", {"class": "folded"},
        el("summary", {}, "system prompt (the same as in the call before)"),
        el("pre", {}, text(m.content))));
    } else parts.push(block(m.role || "message", m.content ?? m));
  }
  parts.push(block("reply", c.reply));
  if (c.tool_calls && c.tool_calls.length) parts.push(block("tool calls", c.tool_calls));
  if (c.error) parts.push(el("div", {"class": "error"}, c.error));
  return el("section", {"class": "item call", "data-call": c.index}, ...parts);
}

function turnSection(t) {
  const action = t.action || {};
  const parts = [el("h3", {}, "turn " + text(t.round) + ": " + text(t.kind))];
  if (action.kind === "tool") parts.push(block("tool call: " + text(action.tool), action.arguments || action.argument));
  else if (action.kind) parts.push(block("action: " + text(action.kind), action.argument));
  if (t.observation !== null && t.observation !== undefined) parts.push(block("observation", t.observation.text ?? t.observation));
  if (t.feedback) parts.push(block("feedback", t.feedback));
  return el("section", {"class": "item turn"}, ...parts);
}

function stepSection(s) {
  const head = "environment " + s.kind + " " + s.index + (s.tool ? ": " + s.tool : "") + " (" + s.status + ")";
  return el("section", {"class": "item env-step"}, el("h3", {}, head),
    block("arguments", s.arguments ?? s.argument), block("observation", s.observation),
    s.error ? el("div", {"class": "error"}, s.error) : null);
}

async function showRollout(id) {
  const data = await getJSON("/api/rollouts/" + encodeURIComponent(id));
  const r = data.rollout;
  const t = data.trajectory;
  const title = el("h2", {}, r.harness + " on " + r.task + " (seed " + r.seed + "): " + r.outcome);
  const meta = el("p", {"class": "meta"}, "rollout " + r.id + ", policy " + r.policy + ", run " +
    r.run_id + ", " + r.steps + " steps, " + r.model_calls + " model calls");
  if (!t) {
    setMain("rollout", title, meta, el("p", {"class": "error"}, data.error));
    return;
  }
  const calls = el("div", {id: "calls"}, el("h2", {}, "Model calls"), ...t.calls.map(callSection));
  const turns = (t.events || []).filter((e) => e.event === "turn");
  const harness = el("div", {id: "turns"}, el("h2", {}, "What the harness did (runtime events)"),
    ...turns.map(turnSection));
  const steps = el("div", {id: "env-steps"}, el("h2", {}, "Environment steps"),
    ...(t.steps || []).map(stepSection));
  const result = el("div", {id: "result"}, el("h2", {}, "Result and score"),
    block("result", t.result), block("score", t.score), block("sandbox", t.sandbox));
  setMain("rollout", title, meta, calls, harness, steps, result);
  document.getElementById("main").setAttribute("data-rollout", r.id);
}

// --- lineage and profiles -----------------------------------------------------------------

async function showLineage() {
  const data = await getJSON("/api/lineage");
  const rows = data.edits.map((e) => el("tr", {},
    el("td", {}, e.round), el("td", {}, e.parent), el("td", {}, e.direction),
    el("td", {}, e.status), el("td", {}, e.child || "-"), el("td", {"class": "num"}, e.reward.toFixed(3)),
    el("td", {"class": "num"}, e.rescues), el("td", {"class": "num"}, e.regressions),
    el("td", {"class": "num"}, e.p_value === null ? "-" : e.p_value.toFixed(3)), el("td", {}, e.reason || "")));
  const headers = ["round", "parent", "direction", "status", "child", "reward", "rescues",
    "regressions", "p", "reason"];
  setMain("lineage", el("h2", {}, "Evolution lineage (every edit)"), table(headers, rows, "lineage-table"));
}

function cardText(card) {
  if (!card || typeof card !== "object") return text(card);
  const lines = [text(card.summary)];
  for (const key of ["fixes", "rescues", "costs", "regresses"]) {
    if (Array.isArray(card[key]) && card[key].length) lines.push(key + ": " + card[key].map(text).join("; "));
  }
  return lines.join("\n");
}

function rateText(success) {
  if (!success || typeof success !== "object") return "-";
  return pct(success.rate) + " (" + success.successes + "/" + success.rollouts + ")";
}

async function showProfiles() {
  const data = await getJSON("/api/profiles");
  const rows = data.profiles.map((p) => el("tr", {},
    el("td", {}, p.harness), el("td", {}, p.policy), el("td", {}, p.suite + "/" + p.split),
    el("td", {}, p.kind), el("td", {}, rateText(p.success)), el("td", {}, el("pre", {}, cardText(p.card)))));
  setMain("profiles", el("h2", {}, "Profiles"),
    table(["harness", "policy", "suite/split", "kind", "success", "card"], rows, "profiles-table"));
}

// --- routing ------------------------------------------------------------------------------

async function route() {
  if (timer !== null) { clearInterval(timer); timer = null; }
  const where = parseHash();
  try {
    if (where.view === "rollout") await showRollout(where.id);
    else if (where.view === "rollouts") await showRollouts(where.params);
    else if (where.view === "pair") await showPair(where.ids);
    else if (where.view === "compare") await showCompare(where.params);
    else if (where.view === "lineage") await showLineage();
    else if (where.view === "profiles") await showProfiles();
    else {
      await showRuns();
      timer = setInterval(() => showRuns().catch(() => {}), POLL_MS);
    }
  } catch (error) {
    setMain("error", el("p", {"class": "error"}, String(error.message || error)));
  }
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", route);
