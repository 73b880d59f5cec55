// memlane inspector: plain JS against the REST API (/v1). No build step, no dependencies.
// Every value from the server goes into the page through textContent, never innerHTML.
"use strict";

const SECTION_COLORS = {
  system: "#8a5cd1", latest: "#2f6fdf", recent: "#5a8fe8", pinned: "#d1495b", state: "#1f9d6a",
  summary: "#e0a030", notes: "#3aa6b9", recalled: "#c7812b", overhead: "#9aa3af",
};
const STRATEGIES = ["hybrid", "simple", "summary", "tiered"];

const state = { sessions: [], selected: null, tab: "transcript", features: {}, highlight: null, contextTicket: 0 };

// ------------------------------------------------------------------ helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.setAttribute("style", value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function ago(iso) {
  const seconds = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 60) return "just now";
  const units = [["d", 86400], ["h", 3600], ["min", 60]];
  for (const [name, size] of units) if (seconds >= size) return `${Math.floor(seconds / size)} ${name} ago`;
  return "just now";
}

function when(iso) {
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

class ApiError extends Error {
  constructor(status, type, message) { super(message); this.status = status; this.type = type; }
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  const key = localStorage.getItem("memlane.key");
  if (key) headers["Authorization"] = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const err = (data && data.error) || {};
    if (response.status === 401) showKeyDialog();
    throw new ApiError(response.status, err.type || "http_error", err.message || response.statusText);
  }
  return data;
}

const enc = encodeURIComponent;
// An untitled session is named after its first user message (the server's display_title).
const titleOf = (s) => s.title || s.display_title || s.id;
const view = () => document.getElementById("view");

function showError(target, error) {
  target.replaceChildren(el("div", { class: error.status === 501 ? "notice" : "error", text: error.message }));
}

// ------------------------------------------------------------------ auth

function showKeyDialog() {
  const dialog = document.getElementById("key-dialog");
  dialog.hidden = false;
  document.getElementById("key-input").focus();
}

async function loadWho() {
  try {
    const who = await api("GET", "/v1/whoami");
    state.features = who.features || {};
    document.getElementById("who").textContent = who.auth
      ? `tenant ${who.tenant} · key ${who.key_id}` : "no auth (loopback) · all tenants";
    return true;
  } catch (error) {
    document.getElementById("who").textContent = error.status === 401 ? "API key needed" : error.message;
    return false;
  }
}

// ------------------------------------------------------------------ sessions list

async function loadSessions() {
  const status = document.getElementById("status-filter").value;
  const query = status ? `?limit=1000&status=${enc(status)}` : "?limit=1000";
  try {
    state.sessions = (await api("GET", `/v1/sessions${query}`)).sessions;
  } catch (error) {
    state.sessions = [];
    document.getElementById("sessions").replaceChildren(el("li", { class: "session-item muted", text: error.message }));
    return;
  }
  renderSessions();
}

function renderSessions() {
  const needle = document.getElementById("session-filter").value.trim().toLowerCase();
  const sort = document.getElementById("session-sort").value;
  let rows = state.sessions.filter((s) => !needle || [s.id, s.display_title, s.user_id, s.agent_id, s.tenant_id]
    .some((v) => v && String(v).toLowerCase().includes(needle)));
  const activity = (s) => new Date(s.last_active_at).getTime();
  const sorters = {
    recent: (a, b) => activity(b) - activity(a),
    oldest: (a, b) => activity(a) - activity(b),
    messages: (a, b) => b.message_count - a.message_count,
    title: (a, b) => titleOf(a).localeCompare(titleOf(b)),
  };
  rows = rows.sort(sorters[sort] || sorters.recent);
  document.getElementById("session-count").textContent = `(${rows.length})`;
  const list = document.getElementById("sessions");
  list.replaceChildren(...rows.map((s) => el("li", {
    class: "session-item" + (state.selected === s.id ? " selected" : ""),
    "data-session": s.id,
    onclick: () => { location.hash = `#/session/${enc(s.id)}/transcript`; },
  },
  el("div", { class: "t" + (s.title ? "" : " derived"), text: titleOf(s),
    title: s.title ? null : "untitled: named after its first user message" }),
  el("div", { class: "m" },
    el("span", { class: `badge ${s.status}`, text: s.status }),
    s.user_id ? el("span", { text: `user ${s.user_id}` }) : null,
    el("span", { text: `${s.message_count} msgs` }),
    el("span", { class: "activity", title: s.last_active_at, text: ago(s.last_active_at) })))));
  if (!rows.length) {
    list.append(el("li", { class: "session-item muted", text: state.sessions.length ? "no sessions match"
      : "No sessions yet. For a demo conversation, run `.venv/bin/memlane demo` in the memlane "
        + "checkout (with the same --store if this server was started with one) and reload this page. "
        + "Your own come from memlane chat, the Python API (Memory or MemoryClient), "
        + "POST /v1/sessions/{id}/messages, or an MCP host." }));
  }
}

// ------------------------------------------------------------------ session view

async function openSession(sessionId, tab) {
  state.selected = sessionId;
  state.tab = tab || "transcript";
  const current = state.tab;
  renderSessions();
  const node = document.getElementById("tpl-session").content.cloneNode(true);
  const root = node.querySelector(".session-view");
  // The tabs work at once, before the session has loaded (a click must never hit a dead link).
  for (const link of root.querySelectorAll(".tab")) {
    link.classList.toggle("active", link.dataset.tab === current);
    link.href = `#/session/${enc(sessionId)}/${link.dataset.tab}`;
  }
  view().replaceChildren(root);
  let session;
  try {
    session = await api("GET", `/v1/sessions/${enc(sessionId)}`);
  } catch (error) {
    if (root.isConnected) showError(view(), error);
    return;
  }
  if (!root.isConnected) return;  // another view replaced this one meanwhile
  root.querySelector(".s-title").textContent = titleOf(session);
  root.querySelector(".s-title").classList.toggle("derived", !session.title);
  root.querySelector(".forget-session").addEventListener("click", () => forgetSession(session));
  root.querySelector(".s-meta").textContent = [
    `id ${session.id}`, session.user_id && `user ${session.user_id}`, session.agent_id && `agent ${session.agent_id}`,
    `tenant ${session.tenant_id}`, session.status, `${session.message_count} messages`,
    `created ${when(session.created_at)}`, `active ${ago(session.last_active_at)}`,
  ].filter(Boolean).join(" · ");
  const body = root.querySelector(".tab-body");
  if (current === "context") renderContextForm(body, session);
  else if (current === "memory") await renderMemory(body, session);
  else if (current === "audit") await renderAudit(body, session);
  else await renderTranscript(body, session);
}

function renderToolCalls(calls) {
  return calls.map((call) => {
    const fn = call.function || {};
    let args = fn.arguments;
    try { args = JSON.stringify(JSON.parse(args), null, 2); } catch (_) { /* keep as sent */ }
    return el("div", { class: "toolcall" }, el("b", { text: `→ ${fn.name || call.type || "tool"}` }),
      ` (${call.id})\n`, args || "");
  });
}

function messageNode(m, actions) {
  const author = m.author_name || m.author_id;
  return el("div", {
    class: `msg ${m.role}${m.hidden ? " hidden" : ""}${state.highlight === m.id ? " highlight" : ""}`,
    id: `msg-${m.id}`, "data-role": m.role,
  },
  el("div", { class: "msg-head" },
    el("span", { class: "role", text: m.role }),
    author ? el("span", { class: "author", text: author }) : null,
    m.role === "tool" ? el("span", { class: "muted", text: `${m.name || "tool"} result for ${m.tool_call_id}` }) : null,
    el("span", { class: "muted", title: m.created_at, text: when(m.created_at) }),
    m.pinned ? el("span", { class: "badge", text: "pinned" }) : null,
    m.importance > 0 ? el("span", { class: "badge", text: `importance ${m.importance}` }) : null,
    m.hidden ? el("span", { class: "badge", text: "cleared" }) : null,
    el("span", { class: "muted", text: `#${m.id} · ${m.token_count ?? "?"} tok` }),
    actions ? el("span", { class: "msg-actions" },
      el("button", { class: "ghost small pin", type: "button", text: m.pinned ? "Unpin" : "Pin",
        title: m.pinned ? "No longer keep this message in every context packet" : "Keep this message in context as important",
        onclick: () => togglePin(m) }),
      el("button", { class: "ghost small danger forget", type: "button", text: "Forget",
        title: "Delete this message and what was learned from it", onclick: () => forgetMessage(m) })) : null),
  m.content ? el("div", { class: "content", text: m.content }) : null,
  ...(m.tool_calls ? renderToolCalls(m.tool_calls) : []));
}

async function renderTranscript(body, session) {
  body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  let messages, turns;
  try {
    [messages, turns] = await Promise.all([
      api("GET", `/v1/sessions/${enc(session.id)}/messages?include_hidden=true`),
      api("GET", `/v1/sessions/${enc(session.id)}/turns?limit=1000`),
    ]);
  } catch (error) {
    showError(body, error);
    return;
  }
  const turnInfo = new Map(turns.turns.map((t, i) => [t.turn_id, { ...t, n: i + 1 }]));
  const nodes = [];
  if (session.system_prompt) {
    nodes.push(el("div", { class: "msg system" }, el("div", { class: "msg-head" },
      el("span", { class: "role", text: "system prompt" })), el("div", { class: "content", text: session.system_prompt })));
  }
  let lastTurn = undefined;
  let exchange = 0;
  for (const m of messages.messages) {
    // A turn boundary: a new store_interaction turn, or a new user message outside turns.
    const boundary = exchange === 0 || (m.turn_id ? m.turn_id !== lastTurn : m.role === "user");
    if (boundary) {
      exchange += 1;
      const t = m.turn_id && turnInfo.get(m.turn_id);
      const label = [`turn ${exchange}`, t && t.intent && `intent ${t.intent}`, t && t.model_used,
        t && t.action_name && `action ${t.action_name}`].filter(Boolean).join(" · ");
      nodes.push(el("div", { class: "turn-sep", "data-turn": m.turn_id || "" }, label));
    }
    lastTurn = m.turn_id;
    nodes.push(messageNode(m, true));
  }
  if (!messages.messages.length) nodes.push(el("p", { class: "muted", text: "no messages yet" }));
  body.replaceChildren(el("div", { id: "transcript" }, nodes));
  if (state.highlight) {
    const target = document.getElementById(`msg-${state.highlight}`);
    if (target) target.scrollIntoView({ block: "center" });
  }
}

// ------------------------------------------------------------------ actions (confirmed, audited by the server)

function confirmAction(title, text, okLabel) {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel || "Confirm";
  dialog.hidden = false;
  document.getElementById("confirm-cancel").focus();
  return new Promise((resolve) => {
    const done = (answer) => (event) => {
      if (event) event.preventDefault();
      dialog.hidden = true;
      document.getElementById("confirm-form").onsubmit = null;
      document.getElementById("confirm-cancel").onclick = null;
      resolve(answer);
    };
    document.getElementById("confirm-form").onsubmit = done(true);
    document.getElementById("confirm-cancel").onclick = done(false);
  });
}

function toast(text, isError) {
  const node = document.getElementById("toast");
  node.textContent = text;
  node.className = "toast" + (isError ? " bad" : "");
  node.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { node.hidden = true; }, 6000);
}

// Runs one change after the person confirmed it; the page is redrawn from the server afterwards.
async function act({ title, text, ok, method, path, body, done, next }) {
  if (!(await confirmAction(title, text, ok))) return false;
  try {
    await api(method, path, body);
  } catch (error) {
    toast(`Refused: ${error.message}`, true);
    return false;
  }
  toast(`${done} (written to the audit log)`);
  await loadSessions();
  if (next) location.hash = next;  // the hashchange redraws the view
  else await route();
  return true;
}

async function forgetSession(session) {
  await act({
    title: "Forget this session?", ok: "Forget session",
    text: `“${titleOf(session)}”: its ${session.message_count} messages, summaries, state and the notes learned `
      + "in it are deleted from disk. This cannot be undone.",
    method: "DELETE", path: `/v1/sessions/${enc(session.id)}`, done: `Forgot session ${titleOf(session)}`, next: "#/",
  });
}

function forgetMessage(m) {
  return act({
    title: `Forget message #${m.id}?`, ok: "Forget message",
    text: `“${(m.content || "").slice(0, 160)}” and what was learned from it are deleted from disk.`,
    method: "DELETE", path: `/v1/messages/${m.id}`, done: `Forgot message #${m.id}`,
  });
}

function togglePin(m) {
  const pin = !m.pinned;
  return act({
    title: pin ? `Pin message #${m.id} as important?` : `Unpin message #${m.id}?`, ok: pin ? "Pin" : "Unpin",
    text: pin ? "It is kept in every context packet of this session and promoted to long-term notes."
      : "It is no longer kept in every context packet.",
    method: "PATCH", path: `/v1/messages/${m.id}`, body: pin ? { pinned: true, importance: 1 } : { pinned: false },
    done: pin ? `Pinned message #${m.id}` : `Unpinned message #${m.id}`,
  });
}

function forgetNote(note) {
  return act({
    title: `Remove note #${note.id}?`, ok: "Remove note",
    text: `“${note.text}” and all its earlier versions are deleted.`,
    method: "DELETE", path: `/v1/notes/${note.id}`, done: `Removed note #${note.id}`,
  });
}

// ------------------------------------------------------------------ notes, state, audit

function sourceLinks(note) {
  if (!note.source_ids || !note.source_ids.length || !note.session_id) return el("span", { class: "muted", text: "no source messages" });
  return el("span", {}, "from ", note.source_ids.flatMap((id, i) => [i ? ", " : null,
    el("a", { class: "source", href: `#/session/${enc(note.session_id)}/transcript/${id}`, text: `#${id}` })]));
}

function noteCard(note) {
  const history = el("div", { class: "note-history" });
  const card = el("div", { class: "note", "data-note": note.id },
    el("div", { class: "note-text", text: note.text }),
    el("div", { class: "note-meta muted" },
      note.slot ? el("span", { class: "slot" }, el("b", { text: note.slot }), note.value ? ` = ${note.value}` : "") : null,
      el("span", { text: note.kind }),
      el("span", { text: `importance ${Number(note.importance).toFixed(2)}` }),
      el("span", { title: note.valid_from, text: `valid from ${when(note.valid_from)}` }),
      note.user_id ? el("span", { text: `about ${note.user_id}` }) : null,
      sourceLinks(note)),
    el("div", { class: "row" },
      el("button", { class: "ghost small history", type: "button", text: "History",
        onclick: () => showHistory(note, history) }),
      el("button", { class: "ghost small danger remove", type: "button", text: "Remove", onclick: () => forgetNote(note) })),
    history);
  return card;
}

async function showHistory(note, target) {
  try {
    const versions = (await api("GET", `/v1/notes/${note.id}/history`)).notes;
    target.replaceChildren(el("b", { text: `${versions.length} version(s), oldest first` }),
      el("ol", {}, versions.map((v) => el("li", { class: v.current ? "current" : "superseded" },
        el("span", { text: v.text }), " ",
        el("span", { class: "muted", text: `${when(v.valid_from)} → ${v.valid_to ? when(v.valid_to) : "now"}`
          + (v.superseded_by ? ` · superseded by #${v.superseded_by}` : "") + (v.current ? " · current" : "") })))));
  } catch (error) {
    showError(target, error);
  }
}

async function renderMemory(body, session) {
  body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  const [notes, st] = await Promise.all([
    api("GET", `/v1/notes?session_id=${enc(session.id)}&limit=200`).catch((e) => e),
    api("GET", `/v1/sessions/${enc(session.id)}/state`).catch((e) => e),
  ]);
  const notesBox = el("div", { id: "notes" });
  if (notes instanceof Error) showError(notesBox, notes);
  else if (!notes.notes.length) notesBox.append(el("p", { class: "muted", text: "No long-term notes this conversation sees yet." }));
  else notesBox.append(...notes.notes.map(noteCard));
  const stateBox = el("div", { id: "state", class: "card" }, el("h3", { text: "Session state" }));
  if (st instanceof Error) showError(stateBox, st);
  else {
    stateBox.append(
      el("div", { class: "muted", text: `status ${st.status} · ${st.turn_count} turns${st.last_intent ? " · last intent " + st.last_intent : ""}` }),
      el("b", { text: "Topics" }), list(st.active_topics),
      el("b", { text: "Open loops" }), list(st.open_loops),
      el("b", { text: "Pending clarifications" }), list(st.pending_clarifications));
  }
  body.replaceChildren(el("div", { class: "ctx-grid" },
    el("div", {}, el("h3", { text: "Notes this conversation sees" }), notesBox), stateBox));
}

async function renderAudit(body, session) {
  body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  let data;
  try {
    data = await api("GET", `/v1/audit?session_id=${enc(session.id)}&limit=200`);
  } catch (error) {
    showError(body, error);
    return;
  }
  const rows = data.entries.map((e) => el("tr", {},
    el("td", { title: e.at, text: when(e.at) }), el("td", { text: e.actor_name ? `${e.actor_name} (${e.actor_id})` : e.actor_id || "" }),
    el("td", { text: e.action }), el("td", { text: e.allowed ? e.result : `refused: ${e.result}` }),
    el("td", { text: Object.entries(e.detail || {}).map(([k, v]) => `${k} ${JSON.stringify(v)}`).join(" · ") })));
  body.replaceChildren(rows.length ? el("table", { id: "audit", class: "table" },
    el("tr", {}, ["when", "who", "action", "result", "detail"].map((h) => el("th", { text: h }))), rows)
    : el("p", { class: "muted", text: "Nothing changed in this conversation's memory yet." }));
}

// ------------------------------------------------------------------ context packet

function renderContextForm(body, session) {
  const saved = JSON.parse(sessionStorage.getItem("memlane.ctx") || "{}");
  const query = el("input", { id: "context-query", type: "text", placeholder: "What is the agent about to answer? (optional)",
    value: saved.query || "" });
  const budget = el("input", { id: "context-budget", type: "number", min: "1", step: "1", value: saved.max_tokens || 1024 });
  const strategy = el("select", { id: "context-strategy" }, STRATEGIES.map((s) => el("option", { value: s, text: s })));
  if (saved.strategy) strategy.value = saved.strategy;
  const out = el("div", { id: "context-out" });
  const build = async (event) => {
    if (event) event.preventDefault();
    const request = { query: query.value.trim() || null, max_tokens: Number(budget.value) || 1024, strategy: strategy.value };
    sessionStorage.setItem("memlane.ctx", JSON.stringify(request));
    out.replaceChildren(el("p", { class: "muted", text: "building…" }));
    const ticket = ++state.contextTicket;  // a slower, older answer must not overwrite a newer one
    try {
      const packet = await api("POST", `/v1/sessions/${enc(session.id)}/context`, request);
      if (ticket === state.contextTicket) renderPacket(out, packet);
    } catch (error) {
      if (ticket === state.contextTicket) showError(out, error);
    }
  };
  body.replaceChildren(
    el("form", { class: "ctx-form", onsubmit: build }, query,
      el("label", { class: "muted", text: "budget" }), budget,
      el("label", { class: "muted", text: "strategy" }), strategy,
      el("button", { id: "context-build", type: "submit", text: "Build packet" })),
    out);
  build();
}

function budgetBar(budget) {
  const total = Math.max(budget.max_tokens, 1);
  const entries = Object.entries(budget.sections || {}).filter(([, n]) => n > 0);
  const segs = entries.map(([name, n]) => el("div", {
    class: "seg", "data-section": name, title: `${name}: ${n} tokens`,
    style: `width:${(100 * n / total).toFixed(2)}%;background:${SECTION_COLORS[name] || "#777"}`,
  }, n / total > 0.06 ? name : ""));
  const legend = entries.map(([name, n]) => el("span", {},
    el("span", { class: "sw", style: `background:${SECTION_COLORS[name] || "#777"}` }),
    `${name} ${n}`));
  legend.push(el("span", { class: "muted", text: `free ${budget.free ?? total - budget.used}` }));
  const dropped = Object.entries(budget.dropped || {}).filter(([, n]) => n > 0);
  return el("div", { class: "budget" },
    el("div", { class: "row" }, el("b", { text: `${budget.used} / ${budget.max_tokens} tokens` }),
      el("span", { class: "muted", text: ` ${budget.encoding || ""}` })),
    el("div", { id: "budget-bar", class: "budget-bar" }, segs),
    el("div", { class: "legend" }, legend),
    dropped.length ? el("div", { class: "muted", style: "font-size:12px;margin-top:4px",
      text: "left out for lack of room: " + dropped.map(([k, n]) => `${k} ${n}`).join(", ") }) : null);
}

function list(items, render) {
  return items && items.length ? el("ul", {}, items.map((x) => el("li", {}, render ? render(x) : String(x))))
    : el("p", { class: "muted", text: "—" });
}

function recalledHeading(recalled) {
  const here = recalled.filter((r) => r.same_session).length;
  const parts = [here && `${here} from this session`, recalled.length - here && `${recalled.length - here} from other sessions`];
  return `Recalled (relevance 0-1)${recalled.length ? ": " + parts.filter(Boolean).join(", ") : ""}`;
}

function renderPacket(out, packet) {
  const budget = packet.budget || { sections: {}, used: 0, max_tokens: 0 };
  const entities = Object.entries(packet.resolved_entities_map || {});
  const stateCard = el("div", { class: "card" },
    el("h3", { text: "Session state" }),
    el("div", { class: "muted", text: `status ${packet.session_status || "?"} · ${packet.turn_count ?? 0} turns · strategy ${packet.strategy || "?"}` }),
    el("b", { text: "Topics" }), list(packet.active_topics),
    el("b", { text: "Open loops" }), list(packet.open_loops),
    el("b", { text: "Pending clarifications" }), list(packet.pending_clarifications),
    entities.length ? el("b", { text: "Resolved references" }) : null,
    entities.length ? list(entities, ([k, v]) => `${k} → ${v}`) : null);
  const summaryCard = el("div", { class: "card" },
    el("h3", { text: "Rolling summary" }),
    el("div", { class: "content", text: packet.rolling_session_summary || "—" }),
    (packet.recent_turn_summaries || []).length ? el("h3", { text: "Turn summaries" }) : null,
    (packet.recent_turn_summaries || []).length ? list(packet.recent_turn_summaries) : null,
    el("h3", { text: "Notes" }), list(packet.notes),
    el("h3", { text: recalledHeading(packet.recalled || []) }),
    list(packet.recalled, (r) => el("span", { class: "recalled-hit" },
      el("span", { class: "hit-score", text: Number(r.score).toFixed(2) }), " ",
      // A hit from this very session is earlier in this conversation, not a past session.
      r.same_session ? el("span", { class: "badge here", text: "this session" })
        : el("span", { class: "badge other", text: `other session: ${r.session_title || r.session_id}` }),
      " ", r.message.content)));
  const rendered = el("div", { class: "card rendered" }, el("h3", { text: "Messages sent to the model" }),
    (packet.messages || []).map((m, i) => messageNode({ ...m, id: `p${i}`, created_at: new Date().toISOString(),
      token_count: "", importance: 0 })));
  out.replaceChildren(budgetBar(budget), el("div", { class: "ctx-grid" }, stateCard, summaryCard), el("br"), rendered);
  for (const node of out.querySelectorAll(".rendered .msg-head .muted")) node.remove();
}

// ------------------------------------------------------------------ search

function searchFilters() {
  const users = [...new Set(state.sessions.map((x) => x.user_id).filter(Boolean))].sort();
  const saved = state.searchFilter || {};
  const user = el("select", { id: "filter-user", "aria-label": "Person" }, el("option", { value: "", text: "any person" }),
    users.map((u) => el("option", { value: u, text: u })));
  const session = el("select", { id: "filter-session", "aria-label": "Session" }, el("option", { value: "", text: "any session" }),
    state.sessions.map((x) => el("option", { value: x.id, text: titleOf(x) })));
  const since = el("select", { id: "filter-since", "aria-label": "Time" },
    [["", "any time"], ["1", "last 24 hours"], ["7", "last 7 days"], ["30", "last 30 days"], ["365", "last year"]]
      .map(([v, t]) => el("option", { value: v, text: t })));
  user.value = saved.user_id || ""; session.value = saved.session_id || ""; since.value = saved.days || "";
  const changed = () => {
    state.searchFilter = { user_id: user.value, session_id: session.value, days: since.value };
    route();
  };
  for (const node of [user, session, since]) node.addEventListener("change", changed);
  return el("div", { class: "row search-filters" }, user, session, since);
}

// Identical texts (a message repeated, or said in several sessions) are one hit with where else it was said.
function groupHits(hits) {
  const groups = new Map();
  for (const hit of hits) {
    const key = (hit.message.content || "").trim().toLowerCase().replace(/\s+/g, " ");
    if (groups.has(key)) groups.get(key).also.push(hit);
    else groups.set(key, { hit, also: [] });
  }
  return [...groups.values()];
}

function hitNode({ hit, also }, top, index) {
  const m = hit.message;
  const parts = Object.entries(hit.scores || {});
  const partTop = Math.max(1e-9, ...parts.map(([, v]) => Math.abs(v)));
  const title = hit.session_title || m.session_id;
  return el("div", { class: "hit", "data-message": m.id, tabindex: "0", "data-index": index,
    onkeydown: (event) => { if (event.key === "Enter") location.hash = `#/session/${enc(m.session_id)}/transcript/${m.id}`; } },
  el("div", { class: "hit-head" },
    el("a", { href: `#/session/${enc(m.session_id)}/transcript/${m.id}`, text: title }),
    el("span", {}, `${m.role}${m.author_name ? " · " + m.author_name : ""} · ${when(m.created_at)}`)),
  el("div", { class: "snippet", text: hit.snippet || m.content }),
  also.length ? el("div", { class: "also muted" }, `also said ${also.length}× in `,
    also.flatMap((h, i) => [i ? ", " : null, el("a", { href: `#/session/${enc(h.message.session_id)}/transcript/${h.message.id}`,
      text: h.session_title || h.message.session_id })])) : null,
  el("details", { class: "score-parts" },
    el("summary", { title: parts.map(([k, v]) => `${k} ${Number(v).toFixed(3)}`).join("\n") },
      el("span", { class: "relevance" }, el("i", { style: `width:${(100 * Math.max(0, hit.score) / top).toFixed(1)}%` })),
      el("span", { class: "hit-score", text: Number(hit.score).toFixed(3) })),
    el("div", { class: "parts" }, parts.flatMap(([name, v]) => [
      el("span", { text: name }),
      el("span", { class: "bar" }, el("i", { style: `width:${(100 * Math.abs(v) / partTop).toFixed(1)}%` })),
      el("span", { class: "v", text: Number(v).toFixed(3) }),
    ]))));
}

async function runSearch(query) {
  state.selected = null;
  renderSessions();
  document.getElementById("search-input").value = query;
  const out = el("div", { id: "search-results" }, el("p", { class: "muted", text: "searching…" }));
  view().replaceChildren(el("h1", { text: `Search: ${query}` }), searchFilters(), out);
  const filter = state.searchFilter || {};
  const request = { query, top_k: 25 };
  if (filter.user_id) request.user_id = filter.user_id;
  if (filter.session_id) request.session_id = filter.session_id;
  if (filter.days) request.since = new Date(Date.now() - Number(filter.days) * 86400e3).toISOString();
  let data;
  try {
    data = await api("POST", "/v1/search", request);
  } catch (error) {
    showError(out, error);
    return;
  }
  if (!data.hits.length) {
    out.replaceChildren(el("p", { class: "muted", text: "nothing found" }));
    return;
  }
  const top = Math.max(1e-9, ...data.hits.map((h) => h.score));
  const groups = groupHits(data.hits);
  out.replaceChildren(el("p", { class: "muted", text: `${data.hits.length} hits` + (groups.length < data.hits.length
    ? `, ${groups.length} distinct texts` : "") + " · ↑/↓ to move, Enter to open, click a bar for its parts" }),
  ...groups.map((g, i) => hitNode(g, top, i)));
}

// Arrow keys move between hits on the search page.
document.addEventListener("keydown", (event) => {
  if (!["ArrowDown", "ArrowUp"].includes(event.key) || !document.getElementById("search-results")) return;
  if (event.target instanceof HTMLInputElement || event.target instanceof HTMLSelectElement) return;
  const hits = [...document.querySelectorAll("#search-results .hit")];
  if (!hits.length) return;
  const at = hits.indexOf(document.activeElement);
  const next = event.key === "ArrowDown" ? Math.min(hits.length - 1, at + 1) : Math.max(0, at - 1);
  hits[next].focus();
  event.preventDefault();
});

// ------------------------------------------------------------------ people

async function renderPeople(user) {
  state.selected = null;
  renderSessions();
  const people = new Map();
  for (const x of state.sessions) if (x.user_id) people.set(x.user_id, [...(people.get(x.user_id) || []), x]);
  const nav = el("ul", { id: "people", class: "people" }, [...people.keys()].sort().map((u) => el("li", {},
    el("a", { href: `#/people/${enc(u)}`, class: u === user ? "selected" : null, text: u }),
    el("span", { class: "muted", text: ` ${people.get(u).length} session(s)` }))));
  if (!user) {
    view().replaceChildren(el("h1", { text: "People" }), people.size ? nav
      : el("p", { class: "muted", text: "No session names a user yet." }));
    return;
  }
  const notesBox = el("div", { id: "notes" }, el("p", { class: "muted", text: "loading…" }));
  view().replaceChildren(el("h1", { text: `People · ${user}` }), nav,
    el("h3", { text: "Sessions" }), list(people.get(user) || [], (x) => el("a", {
      href: `#/session/${enc(x.id)}/memory`, text: titleOf(x) })),
    el("h3", { text: `What memlane believes about ${user} now` }), notesBox);
  try {
    const notes = (await api("GET", `/v1/notes?user_id=${enc(user)}&limit=200`)).notes;
    notesBox.replaceChildren(...(notes.length ? notes.map(noteCard)
      : [el("p", { class: "muted", text: "No long-term notes about this person yet." })]));
  } catch (error) {
    showError(notesBox, error);
  }
}

// ------------------------------------------------------------------ routing

async function route() {
  const hash = decodeURIComponent(location.hash.slice(1));
  const raw = location.hash.slice(1);
  if (raw.startsWith("/search/")) {
    await runSearch(decodeURIComponent(raw.slice("/search/".length)));
    return;
  }
  const person = raw.match(/^\/people\/?(.*)$/);
  if (person) {
    await renderPeople(person[1] ? decodeURIComponent(person[1]) : null);
    return;
  }
  const match = raw.match(/^\/session\/([^/]+)\/?(transcript|context|memory|audit)?\/?(\d+)?$/);
  if (match) {
    state.highlight = match[3] ? Number(match[3]) : null;
    await openSession(decodeURIComponent(match[1]), match[2] || "transcript");
    return;
  }
  if (hash === "/" || hash === "") {
    state.selected = null;
    renderSessions();
    view().replaceChildren(el("div", { class: "empty" }, el("h1", { text: "memlane" }),
      el("p", { text: "Pick a session on the left to read its transcript, notes and context packet, or search everything that was said." })));
  }
}

async function main() {
  document.getElementById("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = document.getElementById("search-input").value.trim();
    if (query) location.hash = `#/search/${enc(query)}`;
  });
  document.getElementById("session-filter").addEventListener("input", renderSessions);
  document.getElementById("session-sort").addEventListener("change", renderSessions);
  document.getElementById("status-filter").addEventListener("change", loadSessions);
  document.getElementById("key-button").addEventListener("click", showKeyDialog);
  document.getElementById("key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = document.getElementById("key-input").value.trim();
    if (key) localStorage.setItem("memlane.key", key);
    document.getElementById("key-dialog").hidden = true;
    if (await loadWho()) { await loadSessions(); await route(); }
  });
  document.getElementById("key-clear").addEventListener("click", () => {
    localStorage.removeItem("memlane.key");
    document.getElementById("key-input").value = "";
  });
  window.addEventListener("hashchange", route);
  if (await loadWho()) {
    await loadSessions();
    await route();
  }
  document.body.dataset.ready = "1";
}

main();
