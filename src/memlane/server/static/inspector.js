// memlane inspector: plain JS against the REST API (/v1). No build step, no dependencies.
// Every value from the server goes into the page through textContent, never innerHTML.
"use strict";

const SECTION_COLORS = {
  system: "#8a5cd1", latest: "#2f6fdf", recent: "#5a8fe8", pinned: "#d1495b", state: "#1f9d6a",
  summary: "#e0a030", notes: "#3aa6b9", recalled: "#c7812b", overhead: "#9aa3af",
};
const STRATEGIES = ["hybrid", "simple", "summary", "tiered"];

const state = { sessions: [], selected: null, tab: "transcript", features: {}, highlight: null, contextTicket: 0,
  noteKind: "", msgFilter: null, sessionLangs: new Map(), transcriptMessages: [] };

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
    const [listed, langs] = await Promise.all([api("GET", `/v1/sessions${query}`),
      api("GET", "/v1/languages").catch(() => ({ sessions: [] }))]);
    state.sessions = listed.sessions;
    // each session's languages (messages.lang, judged when each message was written)
    state.sessionLangs = new Map(langs.sessions.map((x) => [x.session_id, new Set(x.languages.map((l) => langKey(l.lang)))]));
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
  renderFacetOptions();
  const user = document.getElementById("user-filter").value;
  const agent = document.getElementById("agent-filter").value;
  const lang = document.getElementById("lang-filter").value;
  const days = Number(document.getElementById("active-filter").value);
  const since = days ? Date.now() - days * 86400e3 : 0;
  let rows = state.sessions.filter((s) => (!needle || [s.id, s.display_title, s.user_id, s.agent_id, s.tenant_id]
    .some((v) => v && String(v).toLowerCase().includes(needle)))
    && (!user || s.user_id === user) && (!agent || s.agent_id === agent)
    && (!lang || (state.sessionLangs.get(s.id) || new Set()).has(lang))
    && (!since || new Date(s.last_active_at).getTime() >= since));
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

// A language code as a facet value ("" is never judged) and its label.
const LANG_NAMES = { de: "German", en: "English", unknown: "not judged" };
const langKey = (lang) => lang || "unknown";
const langName = (key) => LANG_NAMES[key] || key;

// Facets of the session list: each person, agent and language that has sessions, with how many.
function renderFacetOptions() {
  const facets = [["user-filter", (x) => (x.user_id ? [x.user_id] : []), "any person", String],
    ["agent-filter", (x) => (x.agent_id ? [x.agent_id] : []), "any agent", String],
    ["lang-filter", (x) => [...(state.sessionLangs.get(x.id) || [])], "any language", langName]];
  for (const [id, valuesOf, any, label] of facets) {
    const select = document.getElementById(id);
    const counts = new Map();
    for (const x of state.sessions) for (const v of valuesOf(x)) counts.set(v, (counts.get(v) || 0) + 1);
    const keep = select.value;
    const values = [...counts.keys()].sort();
    const signature = values.map((v) => `${v}:${counts.get(v)}`).join("|");
    if (select.dataset.signature !== signature) {
      select.replaceChildren(el("option", { value: "", text: any }),
        ...values.map((v) => el("option", { value: v, text: `${label(v)} (${counts.get(v)})` })));
      select.dataset.signature = signature;
    }
    select.value = counts.has(keep) ? keep : "";
    select.hidden = !values.length;
  }
}

// ------------------------------------------------------------------ session view

async function openSession(sessionId, tab) {
  if (state.selected !== sessionId) state.msgFilter = null;
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
  root.querySelector(".s-meta").textContent = sessionMeta(session);
  const body = root.querySelector(".tab-body");
  if (current === "context") renderContextForm(body, session);
  else if (current === "memory") await renderMemory(body, session);
  else if (current === "audit") await renderAudit(body, session);
  else if (current === "timeline") await renderTimeline(body, session);
  else await renderTranscript(body, session);
}

function sessionMeta(session) {
  return [
    `id ${session.id}`, session.user_id && `user ${session.user_id}`, session.agent_id && `agent ${session.agent_id}`,
    `tenant ${session.tenant_id}`, session.status, `${session.message_count} messages`,
    `created ${when(session.created_at)}`, `active ${ago(session.last_active_at)}`,
  ].filter(Boolean).join(" · ");
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
    id: `msg-${m.id}`, "data-role": m.role, "data-turn": m.turn_id || "", "data-author": author || "",
    "data-lang": m.lang ? langKey(m.lang) : null,
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
  let messages, turns, langs;
  try {
    [messages, turns, langs] = await Promise.all([
      api("GET", `/v1/sessions/${enc(session.id)}/messages?include_hidden=true`),
      api("GET", `/v1/sessions/${enc(session.id)}/turns?limit=1000`),
      api("GET", `/v1/sessions/${enc(session.id)}/languages`).catch(() => ({ messages: [] })),
    ]);
  } catch (error) {
    showError(body, error);
    return;
  }
  const turnInfo = new Map(turns.turns.map((t, i) => [t.turn_id, { ...t, n: i + 1 }]));
  const langOf = new Map(langs.messages.map((x) => [x.id, langKey(x.lang)]));
  for (const m of messages.messages) m.lang = langOf.get(m.id);
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
  state.transcriptMessages = messages.messages;  // what the facet chips count (live appends join it)
  body.replaceChildren(transcriptFacets(messages.messages), el("div", { id: "transcript" }, nodes));
  applyMessageFilter();
  if (state.highlight) {
    const target = document.getElementById(`msg-${state.highlight}`);
    if (target) target.scrollIntoView({ block: "center" });
  }
}

// Facets of a transcript: who spoke, in which role and language; a click shows only those messages.
function transcriptFacets(messages) {
  const count = (key) => {
    const found = new Map();
    for (const m of messages) { const v = key(m); if (v) found.set(v, (found.get(v) || 0) + 1); }
    return [...found].sort((a, b) => b[1] - a[1]);
  };
  const roles = count((m) => m.role);
  const authors = count((m) => m.author_name || m.author_id);
  const langs = count((m) => m.lang);
  const chip = (facet, value, label) => el("button", { type: "button", class: "chip", "data-facet": facet,
    "data-value": value, text: label, onclick: () => { state.msgFilter = facet ? { facet, value } : null; applyMessageFilter(); } });
  return el("div", { id: "transcript-facets", class: "chips" },
    chip("", "", `all ${messages.length}`),
    roles.map(([v, n]) => chip("role", v, `${v} ${n}`)),
    authors.length > 1 ? authors.map(([v, n]) => chip("author", v, `${v} ${n}`)) : null,
    langs.map(([v, n]) => chip("lang", v, `${langName(v)} ${n}`)));
}

function applyMessageFilter() {
  const f = state.msgFilter;
  for (const node of document.querySelectorAll("#transcript .msg")) {
    // the system prompt (no role of a message) shows only when nothing is filtered
    const value = f && node.dataset.role
      && (f.facet === "role" ? node.dataset.role : f.facet === "lang" ? node.dataset.lang || "" : node.dataset.author || "");
    node.classList.toggle("filtered", Boolean(f) && value !== f.value);
  }
  for (const chip of document.querySelectorAll("#transcript-facets .chip")) {
    chip.classList.toggle("on", f ? chip.dataset.facet === f.facet && chip.dataset.value === f.value : !chip.dataset.facet);
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
  const editor = el("div", { class: "note-editor" });
  const card = el("div", { class: "note", "data-note": note.id, "data-kind": note.kind },
    el("div", { class: "note-text", text: note.text }),
    el("div", { class: "note-meta muted" },
      note.slot ? el("span", { class: "slot" }, el("b", { text: note.slot }), note.value ? ` = ${note.value}` : "") : null,
      el("span", { class: "kind", text: note.kind }),
      el("span", { text: `importance ${Number(note.importance).toFixed(2)}` }),
      el("span", { title: note.valid_from, text: `valid from ${when(note.valid_from)}` }),
      note.user_id ? el("span", { text: `about ${note.user_id}` }) : null,
      note.supersedes ? el("span", { text: `replaces #${note.supersedes}` }) : null,
      sourceLinks(note)),
    el("div", { class: "row" },
      el("button", { class: "ghost small history", type: "button", text: "History",
        onclick: () => showHistory(note, history) }),
      el("button", { class: "ghost small edit", type: "button", text: "Correct",
        title: "Write what the note should say; the old version stays in its history",
        onclick: () => showEditor(note, editor) }),
      el("button", { class: "ghost small danger remove", type: "button", text: "Remove", onclick: () => forgetNote(note) })),
    editor, history);
  return card;
}

// Correcting a note writes a new version that supersedes it (confirmed, audited, reason kept).
function showEditor(note, target) {
  if (target.firstChild) { target.replaceChildren(); return; }
  const text = el("textarea", { class: "edit-text", rows: "2", "aria-label": "Corrected text" });
  text.value = note.text;
  const value = el("input", { class: "edit-value", type: "text", placeholder: "value", "aria-label": "Value" });
  value.value = note.value && note.value !== note.text ? note.value : "";
  const reason = el("input", { class: "edit-reason", type: "text", placeholder: "why (kept in the history and audit log)",
    "aria-label": "Reason" });
  const save = async (event) => {
    event.preventDefault();
    const body = { text: text.value.trim() };
    if (!body.text) { toast("A note needs text: write what it should say, or Remove it.", true); return; }
    if (value.value.trim()) body.value = value.value.trim();
    if (reason.value.trim()) body.reason = reason.value.trim();
    await act({
      title: `Correct note #${note.id}?`, ok: "Save correction",
      text: `“${note.text}” becomes “${body.text}”. The old version stays in the note's history.`,
      method: "PATCH", path: `/v1/notes/${note.id}`, body, done: `Corrected note #${note.id}`,
    });
  };
  target.replaceChildren(el("form", { class: "edit-form", onsubmit: save }, text,
    el("div", { class: "row" }, note.slot ? value : null, reason,
      el("button", { class: "small save", type: "submit", text: "Save" }),
      el("button", { class: "ghost small cancel", type: "button", text: "Cancel", onclick: () => target.replaceChildren() }))));
  text.focus();
}

async function showHistory(note, target) {
  try {
    const versions = (await api("GET", `/v1/notes/${note.id}/history`)).notes;
    target.replaceChildren(el("b", { text: `${versions.length} version(s), oldest first` }),
      el("ol", {}, versions.map((v) => el("li", { class: v.current ? "current" : "superseded", "data-version": v.id },
        el("span", { text: v.text }), " ",
        el("span", { class: "muted", text: `${when(v.valid_from)} → ${v.valid_to ? when(v.valid_to) : "now"}`
          + (v.current ? " · current" : "") }),
        v.superseded_why ? el("div", { class: "why" }, el("b", { text: "why: " }), v.superseded_why,
          v.superseded_by ? el("span", { class: "muted", text: ` · by #${v.superseded_by}`
            + (v.superseded_by_text ? `: “${v.superseded_by_text}”` : "") }) : null) : null))));
  } catch (error) {
    showError(target, error);
  }
}

// Notes with a facet bar by kind (preference, fact, ...): a click shows one kind only.
function notesWithFacets(notes, empty) {
  const box = el("div", {});
  if (!notes.length) return el("p", { class: "muted", text: empty });
  const kinds = new Map();
  for (const n of notes) kinds.set(n.kind, (kinds.get(n.kind) || 0) + 1);
  const draw = () => {
    const shown = notes.filter((n) => !state.noteKind || n.kind === state.noteKind);
    box.replaceChildren(el("div", { class: "chips note-kinds" },
      [["", `all ${notes.length}`], ...[...kinds].sort().map(([k, n]) => [k, `${k} ${n}`])].map(([k, label]) =>
        el("button", { type: "button", class: "chip" + (state.noteKind === k ? " on" : ""), "data-kind": k, text: label,
          onclick: () => { state.noteKind = k; draw(); } }))),
    ...(shown.length ? shown.map(noteCard) : [el("p", { class: "muted", text: `No ${state.noteKind} notes here.` })]));
  };
  if (state.noteKind && !kinds.has(state.noteKind)) state.noteKind = "";
  draw();
  return box;
}

const FACET_LABELS = { entity: "Names", link: "Links", time: "Dates", action: "Actions (tool calls)" };

// What was tracked beside the dialogue; a click searches this conversation for it.
function facetCard(session, facets) {
  const box = el("div", { id: "facets", class: "card" }, el("h3", { text: "Facets" }));
  if (facets instanceof Error) { showError(box, facets); return box; }
  const byKind = new Map();
  for (const f of facets.facets) {
    const values = byKind.get(f.kind) || new Map();
    const seen = values.get(f.value) || { n: 0, message: f.message_id };
    seen.n += 1;
    values.set(f.value, seen);
    byKind.set(f.kind, values);
  }
  if (!byKind.size) box.append(el("p", { class: "muted", text: "Nothing tracked yet (names, links, dates, tool calls)." }));
  for (const kind of ["entity", "link", "time", "action"]) {
    const values = byKind.get(kind);
    if (!values) continue;
    box.append(el("b", { text: FACET_LABELS[kind] }), el("div", { class: "chips", "data-facet-kind": kind },
      [...values].map(([value, seen]) => el("a", { class: "chip", "data-facet": value,
        title: `${seen.n}× · first in message #${seen.message}`,
        href: `#/session/${enc(session.id)}/transcript/${seen.message}` }, value,
        seen.n > 1 ? el("span", { class: "muted", text: ` ${seen.n}` }) : null))));
  }
  return box;
}

async function renderMemory(body, session) {
  body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  const [notes, st, facets] = await Promise.all([
    api("GET", `/v1/notes?session_id=${enc(session.id)}&limit=200`).catch((e) => e),
    api("GET", `/v1/sessions/${enc(session.id)}/state`).catch((e) => e),
    api("GET", `/v1/sessions/${enc(session.id)}/facets?limit=1000`).catch((e) => e),
  ]);
  const notesBox = el("div", { id: "notes" });
  if (notes instanceof Error) showError(notesBox, notes);
  else notesBox.append(notesWithFacets(notes.notes, "No long-term notes this conversation sees yet."));
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
    el("div", {}, el("h3", { text: "Notes this conversation sees" }), notesBox),
    el("div", { class: "stack" }, stateBox, facetCard(session, facets))));
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

// ------------------------------------------------------------------ pictures (uPlot, vendored under /static/vendor)

const DAY = 86400;

// Bars at their dates: every day from the first to the last (and one either side, so a
// single day still has a width); over a long span, one bar per month instead of
// hundreds of hairlines.
function dailySeries(days, keys) {
  if (!days.length) return null;
  const at = (d) => Date.parse(`${d}T00:00:00Z`) / 1000;
  const span = (at(days[days.length - 1].day) - at(days[0].day)) / DAY;
  if (span > 180) {
    const months = new Map();
    for (const d of days) {
      const t = Date.parse(`${d.day.slice(0, 7)}-01T00:00:00Z`) / 1000;
      const sum = months.get(t) || Object.fromEntries(keys.map((k) => [k, 0]));
      for (const k of keys) sum[k] += d[k];
      months.set(t, sum);
    }
    const xs = [...months.keys()].sort((a, b) => a - b);
    return { unit: "month", data: [xs, ...keys.map((k) => xs.map((t) => months.get(t)[k]))] };
  }
  const byDay = new Map(days.map((d) => [at(d.day), d]));
  const xs = [];
  for (let t = at(days[0].day) - DAY; t <= at(days[days.length - 1].day) + DAY; t += DAY) xs.push(t);
  return { unit: "day", data: [xs, ...keys.map((k) => xs.map((t) => (byDay.has(t) ? byDay.get(t)[k] : 0)))] };
}

// A small bar chart of per-day counts, with the numbers in a table beneath (for reading and copying).
function dayChart(id, title, days, series) {
  const plot = el("div", { class: "plot" });
  const table = el("table", { class: "table numbers" },
    el("tr", {}, el("th", { text: "day" }), series.map((x) => el("th", { text: x.label }))),
    days.map((d) => el("tr", { "data-day": d.day }, el("td", { text: d.day }), series.map((x) => el("td", { text: String(d[x.key]) })))));
  const box = el("div", { id, class: "card chart" }, el("h3", { text: title }), plot,
    el("details", {}, el("summary", { class: "muted", text: "numbers" }), table));
  const found = dailySeries(days, series.map((x) => x.key));
  if (!found) { plot.append(el("p", { class: "muted", text: "nothing yet" })); return box; }
  const data = found.data;
  if (found.unit === "month") box.querySelector("h3").textContent = title.replace("per day", "per month");
  if (typeof uPlot === "undefined") { plot.append(el("p", { class: "muted", text: "chart library missing; see the numbers" })); return box; }
  // Stacked: each series is drawn as the running total up to it, tallest first, so every
  // part shows as its own band of the day's bar.
  const stacked = data.slice(1).map((_, i) => data[0].map((__, j) => data.slice(1, i + 2).reduce((a, ys) => a + ys[j], 0)));
  const order = series.map((x, i) => ({ ...x, ys: stacked[i] })).reverse();
  if (series.length > 1) {
    box.insertBefore(el("div", { class: "legend" }, series.map((x) => el("span", {},
      el("span", { class: "sw", style: `background:${x.color}` }), x.label))), plot.nextSibling);
  }
  requestAnimationFrame(() => {
    if (!box.isConnected) return;
    const width = Math.max(260, plot.clientWidth || 600);
    const bars = uPlot.paths.bars({ size: [0.7, 28] });
    const chart = new uPlot({
      width, height: 150, legend: { show: false },
      scales: { x: { time: true } },
      axes: [{ space: 60 }, { size: 40 }],
      series: [{}, ...order.map((x) => ({ label: x.label, stroke: x.color, fill: x.color, width: 0, paths: bars, points: { show: false } }))],
    }, [data[0], ...order.map((x) => x.ys)], plot);
    // follow the page's width (a window resized, a phone turned)
    new ResizeObserver(() => {
      if (box.isConnected && plot.clientWidth) chart.setSize({ width: Math.max(260, plot.clientWidth), height: 150 });
    }).observe(box);
  });
  return box;
}

function figureTiles(figures, cap) {
  const bytes = (n) => (n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(0)} KiB` : `${n} B`);
  const tiles = [
    ["sessions", "sessions", figures.sessions], ["messages", "messages", figures.messages],
    ["notes", "current notes", figures.notes], ["notes_superseded", "superseded notes", figures.notes_superseded],
    ["index_backlog", "waiting to be embedded", figures.index_backlog === null ? null
      : `${figures.index_backlog}${figures.index_backlog >= cap ? "+" : ""}`],
    ["database_bytes", "database size", figures.database_bytes === null ? null : bytes(figures.database_bytes)],
  ];
  return el("div", { id: "figures", class: "tiles" }, tiles.map(([key, label, value]) => el("div", {
    class: "tile" + (value === null || value === undefined ? " na" : ""), "data-figure": key,
    title: value === null || value === undefined ? "not shown for an API key: it spans every tenant" : null,
  }, el("b", { text: value === null || value === undefined ? "—" : String(value) }), el("span", { text: label }))));
}

async function renderOverview() {
  state.selected = null;
  renderSessions();
  const out = el("div", { id: "overview" }, el("p", { class: "muted", text: "loading…" }));
  view().replaceChildren(el("h1", { text: "Overview" }), out);
  let data;
  try {
    data = await api("GET", "/v1/overview");
  } catch (error) {
    showError(out, error);
    return;
  }
  out.replaceChildren(figureTiles(data.figures, data.backlog_cap), el("div", { class: "ctx-grid" },
    dayChart("chart-messages", "Messages per day", data.messages_per_day,
      [{ key: "user", label: "user", color: "#2f6fdf" }, { key: "assistant", label: "assistant", color: "#1f9d6a" },
        { key: "other", label: "system/tool", color: "#c7812b" }]),
    dayChart("chart-sessions", "Sessions started per day", data.sessions_per_day, [{ key: "sessions", label: "sessions", color: "#8a5cd1" }])));
}

// The log as one strip: which messages summary blocks cover, the raw tail, and the checkpoint.
function logStrip(t) {
  const n = Math.max(1, t.messages);
  const pct = (x) => `${(100 * x / n).toFixed(3)}%`;
  const segs = t.summary.blocks.map((b) => el("div", {
    class: "seg summary", "data-block": b.index,
    title: `summary block ${b.index + 1}: messages #${b.first_message_id}–#${b.last_message_id}, `
      + `turns ${b.first_turn + 1}–${b.first_turn + b.turns}, ${b.source_tokens} → ${b.tokens} tokens`
      + (b.topics.length ? `\ntopics: ${b.topics.join(", ")}` : ""),
    style: `left:${pct(b.first_position)};width:${pct(b.last_position - b.first_position + 1)}`,
  }));
  const raw = t.messages - t.summary.summarized_messages;
  if (raw > 0) segs.push(el("div", { class: "seg raw", title: `${raw} messages not summarized yet (kept word for word)`,
    style: `left:${pct(t.summary.summarized_messages)};width:${pct(raw)}` }));
  const cp = t.checkpoint;
  if (cp.position !== undefined && cp.position >= 0) segs.push(el("div", { class: "checkpoint",
    title: `checkpoint (${cp.state}) after message #${cp.last_message_id}, written ${when(cp.written_at)}`,
    style: `left:${pct(cp.position + 1)}` }));
  const cpText = cp.written_at ? `checkpoint ${cp.state}: after message #${cp.last_message_id}, ${ago(cp.written_at)} (${cp.reason})`
    : `checkpoint ${cp.state}`;
  return el("div", { id: "log-strip", class: "card" }, el("h3", { text: "What the summaries cover" }),
    el("div", { class: "strip" }, segs),
    el("div", { class: "legend" },
      el("span", {}, el("span", { class: "sw summary" }), `${t.summary.blocks.length} summary block(s), `
        + `${t.summary.summarized_messages} of ${t.messages} messages, ${t.summary.tokens_saved} tokens saved`),
      el("span", {}, el("span", { class: "sw raw" }), `${raw} raw`),
      el("span", { class: "cp-text" }, el("span", { class: "sw checkpoint" }), cpText)),
    t.summary.blocks.length ? el("ol", { class: "blocks" }, t.summary.blocks.map((b) => el("li", { "data-block": b.index },
      el("a", { href: `#/session/${enc(t.session_id)}/transcript/${b.first_message_id}`,
        text: `turns ${b.first_turn + 1}–${b.first_turn + b.turns}` }),
      ` · messages #${b.first_message_id}–#${b.last_message_id}`, b.topics.length ? ` · ${b.topics.join(", ")}` : ""))) : null);
}

async function renderTimeline(body, session) {
  body.replaceChildren(el("p", { class: "muted", text: "loading…" }));
  let t;
  try {
    t = await api("GET", `/v1/sessions/${enc(session.id)}/timeline`);
  } catch (error) {
    showError(body, error);
    return;
  }
  body.replaceChildren(el("div", { id: "timeline" },
    dayChart("chart-session-days", "Messages per day", t.days,
      [{ key: "user", label: "user", color: "#2f6fdf" }, { key: "assistant", label: "assistant", color: "#1f9d6a" },
        { key: "other", label: "system/tool", color: "#c7812b" }]),
    logStrip(t)));
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
  return el("div", { class: "hit", "data-message": m.id, "data-session": m.session_id, tabindex: "0", "data-index": index,
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
  const acrossBox = el("div", { id: "person-summary" }, el("p", { class: "muted", text: "loading…" }));
  view().replaceChildren(el("h1", { text: `People · ${user}` }), nav,
    el("h3", { text: "Sessions" }), list(people.get(user) || [], (x) => el("a", {
      href: `#/session/${enc(x.id)}/memory`, text: titleOf(x) })),
    el("div", { class: "ctx-grid" },
      el("div", {}, el("h3", { text: `What memlane believes about ${user} now` }), notesBox),
      el("div", { class: "stack" }, acrossBox)));
  const [notes, summary] = await Promise.all([
    api("GET", `/v1/notes?user_id=${enc(user)}&limit=200`).catch((e) => e),
    api("GET", `/v1/people/${enc(user)}`).catch((e) => e),
  ]);
  if (notes instanceof Error) showError(notesBox, notes);
  else notesBox.replaceChildren(notesWithFacets(notes.notes, "No long-term notes about this person yet."));
  if (summary instanceof Error) showError(acrossBox, summary);
  else acrossBox.replaceChildren(...personSummary(summary));
}

// A person's session state and facets summed over their sessions (GET /v1/people/{id}).
function personSummary(summary) {
  const titles = new Map(summary.sessions.map((x) => [x.session_id, x.title || x.session_id]));
  const from = (ids) => el("span", { class: "muted" }, " — ", ...ids.flatMap((sid, i) => [i ? ", " : null,
    el("a", { href: `#/session/${enc(sid)}/memory`, text: titles.get(sid) || sid })]).filter(Boolean));
  const items = (rows, key, empty) => (rows.length
    ? el("ul", {}, rows.map((r) => el("li", { "data-item": r[key] }, r[key], from(r.session_ids))))
    : el("p", { class: "muted", text: empty }));
  const stateCard = el("div", { id: "person-state", class: "card" }, el("h3", { text: "Session state, all sessions" }));
  if (!summary.state) stateCard.append(el("p", { class: "muted", text: "No state tracker in this build." }));
  else {
    stateCard.append(el("b", { text: "Topics" }), items(summary.state.topics, "topic", "none"),
      el("b", { text: "Open loops" }), items(summary.state.open_loops, "text", "none"),
      el("b", { text: "Pending clarifications" }), items(summary.state.pending_clarifications, "text", "none"));
  }
  const facetBox = el("div", { id: "person-facets", class: "card" }, el("h3", { text: "Facets, all sessions" }));
  const byKind = new Map();
  for (const f of summary.facets || []) byKind.set(f.kind, [...(byKind.get(f.kind) || []), f]);
  if (!byKind.size) facetBox.append(el("p", { class: "muted", text: "Nothing tracked yet (names, links, dates, tool calls)." }));
  for (const kind of ["entity", "link", "time", "action"]) {
    if (!byKind.has(kind)) continue;
    facetBox.append(el("b", { text: FACET_LABELS[kind] }), el("div", { class: "chips", "data-facet-kind": kind },
      byKind.get(kind).map((f) => el("a", { class: "chip", "data-facet": f.value,
        title: `${f.count}× in ${f.session_ids.length} session(s) · first in message #${f.first.message_id}`,
        href: `#/session/${enc(f.first.session_id)}/transcript/${f.first.message_id}` }, f.value,
        f.count > 1 ? el("span", { class: "muted", text: ` ${f.count}` }) : null))));
  }
  const note = summary.truncated ? [el("p", { class: "muted", text: `Summed over the ${summary.sessions.length} most recently active sessions.` })] : [];
  return [...note, stateCard, facetBox];
}

// ------------------------------------------------------------------ live updates (SSE from /v1/events)
// fetch() rather than EventSource: EventSource cannot send the Authorization header.

const live = { controller: null, lastId: null, retry: 1000, timers: {}, connects: 0, settled: null,
  appends: Promise.resolve() };

// Resolves once the stream is open (or cannot be): the page loads its data after that, so
// a change made while it loads arrives as an event instead of being missed.
function liveSettled() {
  return Promise.race([new Promise((resolve) => { live.settled = resolve; }), new Promise((r) => setTimeout(r, 3000))]);
}

function setLive(status, text) {
  const node = document.getElementById("live");
  node.dataset.state = status;
  node.textContent = text;
  if (status !== "connecting" && live.settled) { live.settled(); live.settled = null; }
}

function later(name, fn, ms) {
  clearTimeout(live.timers[name]);
  live.timers[name] = setTimeout(fn, ms === undefined ? 250 : ms);
}

async function startLive() {
  if (live.controller) live.controller.abort();
  const controller = new AbortController();
  live.controller = controller;
  while (!controller.signal.aborted) {
    try {
      const headers = { Accept: "text/event-stream" };
      const key = localStorage.getItem("memlane.key");
      if (key) headers.Authorization = `Bearer ${key}`;
      if (live.lastId !== null) headers["Last-Event-ID"] = String(live.lastId);
      setLive("connecting", "connecting…");
      const response = await fetch("/v1/events", { headers, signal: controller.signal });
      if (response.status === 401 || response.status === 422) {
        setLive("off", response.status === 401 ? "not live: API key needed" : "not live: this store keeps no events");
        return;
      }
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      setLive("on", "live");
      live.retry = 1000;
      // Reconnected without a resume point: what changed meanwhile is read again in full.
      if (live.connects++ > 0 && live.lastId === null) later("sessions", refreshView);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          handleFrame(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch (_) {
      if (controller.signal.aborted) return;
    }
    setLive("retry", "reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, live.retry));
    live.retry = Math.min(live.retry * 2, 15000);
  }
}

function handleFrame(frame) {
  let id = null;
  let data = "";
  for (const line of frame.split("\n")) {
    if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("data:")) data += line.slice(5).trim();
  }
  if (!data) return;  // a comment or keep-alive
  if (id !== null) live.lastId = Number(id);
  try {
    onEvent(JSON.parse(data));
  } catch (error) {
    console.warn("memlane: unreadable change event", error);
  }
}

async function refreshView() {
  await loadSessions();
  await route();
}

// An editor with unsaved text is never redrawn under the person typing.
const editing = () => [...document.querySelectorAll(".note-editor")].some((n) => n.firstChild);

// The open session's header (message count, status, activity) as the server has it now.
async function refreshMeta(sessionId) {
  let session;
  try { session = await api("GET", `/v1/sessions/${enc(sessionId)}`); } catch (_) { return; }
  const meta = document.querySelector(".session-view .s-meta");
  if (meta && state.selected === sessionId) meta.textContent = sessionMeta(session);
}

function onEvent(e) {
  document.body.dataset.lastEvent = String(e.id);
  const open = state.selected === e.session_id;
  if (open && (e.kind.startsWith("message.") || e.kind === "session.updated")) later("meta", () => refreshMeta(e.session_id));
  if (e.kind === "message.appended") {
    later("sessions", loadSessions);
    // one at a time, in event order: the transcript keeps the log's order
    if (open && state.tab === "transcript") live.appends = live.appends.then(() => appendLive(e.subject_id)).catch(() => {});
  } else if (e.kind === "message.forgotten") {
    removeMessage(e.subject_id);
    later("sessions", loadSessions);
  } else if (e.kind === "session.forgotten") {
    sessionGone(e.session_id);
  } else if (e.kind === "events.lost") {
    // events it had not read were pruned from the outbox: read everything again
    later("sessions", refreshView);
    return;
  } else if (e.kind.startsWith("session.")) {
    later("sessions", loadSessions);
  }
  // the pictures count everything: redraw them after a quiet second
  if (document.getElementById("overview") || (open && document.getElementById("timeline"))) later("pictures", route, 1000);
  if (e.kind.startsWith("note.")) {
    const showsNotes = document.getElementById("notes");
    if (showsNotes && !editing()) later("notes", route, 400);
  }
}

async function appendLive(messageId) {
  if (document.getElementById(`msg-${messageId}`)) return;
  let m;
  try {
    m = await api("GET", `/v1/messages/${messageId}`);
  } catch (_) {
    return;  // forgotten already, or not ours
  }
  // its language, as a loaded message has it (the endpoint judges messages still waiting for one)
  const langs = await api("GET", `/v1/sessions/${enc(m.session_id)}/languages`).catch(() => ({ messages: [] }));
  const judged = langs.messages.find((x) => x.id === m.id);
  m.lang = judged ? langKey(judged.lang) : undefined;
  const transcript = document.getElementById("transcript");
  if (!transcript || state.selected !== m.session_id || document.getElementById(`msg-${m.id}`)) return;
  // the facet chips count it too (language, role, author)
  state.transcriptMessages = [...state.transcriptMessages, m];
  const facets = document.getElementById("transcript-facets");
  if (facets) facets.replaceWith(transcriptFacets(state.transcriptMessages));
  const placeholder = transcript.querySelector(":scope > p.muted");
  if (placeholder) placeholder.remove();
  const last = [...transcript.querySelectorAll(".msg")].pop();
  const lastTurn = last ? last.dataset.turn || "" : null;
  if (last === undefined || (m.turn_id ? m.turn_id !== lastTurn : m.role === "user")) {
    const n = transcript.querySelectorAll(".turn-sep").length + 1;
    transcript.append(el("div", { class: "turn-sep", "data-turn": m.turn_id || "" }, `turn ${n}`));
  }
  const node = messageNode(m, true);
  node.classList.add("live-new");
  transcript.append(node);
  applyMessageFilter();
  node.scrollIntoView({ block: "nearest" });
}

function removeMessage(messageId) {
  for (const node of document.querySelectorAll(`#msg-${messageId}, #search-results .hit[data-message='${messageId}']`)) node.remove();
  const kept = state.transcriptMessages.filter((m) => m.id !== messageId);
  const facets = document.getElementById("transcript-facets");
  if (kept.length !== state.transcriptMessages.length && facets) {
    state.transcriptMessages = kept;
    facets.replaceWith(transcriptFacets(kept));
    applyMessageFilter();
  }
}

function sessionGone(sessionId) {
  state.sessions = state.sessions.filter((x) => x.id !== sessionId);
  renderSessions();
  for (const node of document.querySelectorAll(`#search-results .hit[data-session='${CSS.escape(sessionId)}']`)) node.remove();
  if (state.selected === sessionId) {
    state.selected = null;
    view().replaceChildren(el("div", { id: "gone", class: "notice",
      text: "This session was just forgotten (here or by another client): it is gone from memory." }));
  } else if (document.getElementById("notes") && !editing()) {
    later("notes", route, 400);
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
  if (raw === "/overview") {
    await renderOverview();
    return;
  }
  const person = raw.match(/^\/people\/?(.*)$/);
  if (person) {
    await renderPeople(person[1] ? decodeURIComponent(person[1]) : null);
    return;
  }
  const match = raw.match(/^\/session\/([^/]+)\/?(transcript|context|memory|audit|timeline)?\/?(\d+)?$/);
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
    if (await loadWho()) {
      live.lastId = null;
      const ready = liveSettled();
      startLive();
      await ready;
      await loadSessions();
      await route();
    }
  });
  document.getElementById("key-clear").addEventListener("click", () => {
    localStorage.removeItem("memlane.key");
    document.getElementById("key-input").value = "";
  });
  for (const id of ["user-filter", "agent-filter", "lang-filter", "active-filter"]) {
    document.getElementById(id).addEventListener("change", renderSessions);
  }
  window.addEventListener("hashchange", route);
  if (await loadWho()) {
    const ready = liveSettled();
    startLive();  // first, so nothing that changes while the page loads is missed
    await ready;
    await loadSessions();
    await route();
  }
  document.body.dataset.ready = "1";
}

main();
