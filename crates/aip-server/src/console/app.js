// aip console: a client of the same /aip/v1 API as every other client. The bearer token lives in
// this tab's sessionStorage only and travels in the Authorization header; nothing is written into
// the DOM as HTML (textContent only), so server data cannot inject markup.
"use strict";

const TOKEN_KEY = "aip.console.token";
const $ = (id) => document.getElementById(id);
let me = null;
let timers = [];
let streamAbort = null;
// Bumped by every navigation: a render whose navigation was superseded while it awaited stops.
let generation = 0;
const current = (gen) => gen === generation;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return node;
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(`${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options) {
  const opts = options || {};
  const headers = { Authorization: `Bearer ${token()}` };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: opts.method || "GET",
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    credentials: "omit",
    cache: "no-store",
  });
  const value = await response.json().catch(() => null);
  if (!response.ok) {
    const error = (value && (value.error || (value.body && value.body.error && value.body.error.error))) || {};
    throw new ApiError(response.status, error.code || `http.${response.status}`, error.message || "");
  }
  return value;
}

function show(section) {
  for (const id of ["signin", "approvals", "actions", "action"]) $(id).hidden = id !== section;
  $("nav").hidden = section === "signin";
}

function clearTimers() {
  timers.forEach(clearInterval);
  timers = [];
  if (streamAbort) streamAbort.abort();
  streamAbort = null;
}

async function route() {
  const gen = ++generation;
  clearTimers();
  if (!token()) return show("signin");
  if (!me) {
    try {
      me = await api("/aip/v1/whoami");
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      $("signin-error").textContent = e instanceof ApiError ? e.message : String(e);
      return show("signin");
    }
    $("who").textContent = `signed in as ${me.id} (${me.tenant})`;
  }
  if (!current(gen)) return;
  const hash = location.hash.replace(/^#/, "");
  if (hash.startsWith("action/")) return renderAction(decodeURIComponent(hash.slice(7)), gen);
  if (hash === "actions") return renderActions(gen);
  return renderApprovals(gen);
}

// ---- approvals inbox ----

function countdown(node, expiresAt) {
  const tick = () => {
    const left = Math.max(0, Date.parse(expiresAt) - Date.now());
    const s = Math.floor(left / 1000);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    node.textContent = left === 0 ? "expired" : `${h}h ${String(m).padStart(2, "0")}m ${String(s % 60).padStart(2, "0")}s`;
  };
  tick();
  timers.push(setInterval(tick, 1000));
}

function ruleText(policy) {
  if (!policy) return "-";
  const rule = policy.rule;
  const leaf = (r) => (r.operator === "role" ? `role ${r.name}` : r.operator === "group" ? `group ${r.name}` : r.operator === "principal" ? `principal ${r.id}` : r.operator === "tenant_policy" ? `policy ${r.policy_id}` : r.operator);
  if (!rule) {
    const s = policy.approver_selector || {};
    return s.type === "role" ? `role ${s.name}` : s.type === "group" ? `group ${s.name}` : s.type === "principal" ? `principal ${s.id}` : String(s.type);
  }
  if (rule.operator === "quorum") return `${rule.required} of: ${rule.rules.map(leaf).join(", ")}`;
  if (rule.operator === "all" || rule.operator === "any") return `${rule.operator} of: ${rule.rules.map(leaf).join(", ")}`;
  return leaf(rule);
}

async function renderApprovals(gen) {
  gen = gen === undefined ? ++generation : gen;
  show("approvals");
  const list = $("approvals-list");
  list.replaceChildren();
  $("approvals-status").textContent = "Loading…";
  let page;
  try {
    page = await api(`/aip/v1/approvals?status=pending&approver=${encodeURIComponent(me.id)}&include_action_status=true`);
  } catch (e) {
    if (current(gen)) $("approvals-status").textContent = e.message;
    return;
  }
  if (!current(gen)) return;
  const approvals = page.approvals || [];
  $("approvals-status").textContent = approvals.length === 0 ? "Nothing is waiting for you." : `${approvals.length} waiting`;
  for (const view of approvals) list.append(approvalCard(view));
}

function approvalCard(view) {
  const r = view.request;
  const policy = r.policy_snapshot || {};
  const needed = Math.max(policy.minimum_distinct_principals || 1, (policy.rule && policy.rule.required) || 1);
  const quorum = el("span", {}, `${needed} distinct approval(s) needed`);
  api(`/aip/v1/approvals/${encodeURIComponent(r.id)}/decisions`)
    .then((page) => {
      const approvers = [...new Set((page.decisions || []).filter((d) => d.decision === "approved").map((d) => d.approver.id))];
      quorum.textContent = `${approvers.length} of ${needed} distinct approval(s) so far${approvers.length ? `: ${approvers.join(", ")}` : ""}`;
    })
    .catch(() => {});
  const expires = el("span", { class: "mono" });
  countdown(expires, r.expires_at);
  const reasonId = `reason-${r.id}`;
  const reason = el("input", { id: reasonId, name: "reason", autocomplete: "off" });
  const message = el("p", { class: "error", role: "alert" });
  const decide = async (decision) => {
    message.textContent = "";
    try {
      const body = { decision, policy_hash: r.policy_hash };
      if (reason.value.trim()) body.reason = reason.value.trim();
      const result = await api(`/aip/v1/approvals/${encodeURIComponent(r.id)}/decision`, { method: "POST", body });
      message.className = "";
      message.textContent = `Recorded: the approval is now ${result.status}.`;
      const g = generation;
      if (result.status !== "pending") setTimeout(() => current(g) && renderApprovals(), 800);
    } catch (e) {
      message.className = "error";
      message.textContent = e instanceof ApiError ? `Refused: ${e.code}: ${e.message}` : String(e);
    }
  };
  const approve = el("button", { type: "button", class: "approve" }, "Approve");
  approve.addEventListener("click", () => decide("approved"));
  const deny = el("button", { type: "button", class: "deny" }, "Deny");
  deny.addEventListener("click", () => decide("denied"));
  const actionLink = el("a", { href: `#action/${encodeURIComponent(r.action_id)}` }, r.action_id);
  // The governed input stays out of ordinary reads (spec 16.6); principals holding the export
  // scopes may request it, and the server audits each export.
  const input = el("dd", {}, "withheld from ordinary reads; bound by the policy hash");
  const scopes = (me && me.scopes) || [];
  if (scopes.includes("*") || (scopes.includes("approval:export") && scopes.includes("approval:sensitive"))) {
    const reveal = el("button", { type: "button" }, "Show governed input (audited export)");
    reveal.addEventListener("click", async () => {
      try {
        const v = await api(`/aip/v1/approvals/${encodeURIComponent(r.id)}?include_evidence_payload=true`);
        input.replaceChildren(el("code", {}, JSON.stringify(v.evidence_payload.input)));
      } catch (e) {
        input.replaceChildren(el("span", { class: "error" }, e.message));
      }
    });
    input.append(" ", reveal);
  }
  return el(
    "article",
    { class: "card", "aria-label": `Approval ${r.id}` },
    el("h3", {}, `${r.capability_id} — ${r.reason}`),
    el(
      "dl",
      {},
      el("dt", {}, "Approval"), el("dd", { class: "mono" }, r.id),
      el("dt", {}, "Action"), el("dd", {}, actionLink, ` (${(view.action_status && view.action_status.state) || "?"})`),
      el("dt", {}, "Requester"), el("dd", {}, r.requester.id),
      el("dt", {}, "Risk"), el("dd", {}, r.risk || "-"),
      el("dt", {}, "Who may approve"), el("dd", {}, ruleText(policy)),
      el("dt", {}, "Quorum"), el("dd", {}, quorum),
      el("dt", {}, "Input"), input,
      el("dt", {}, "Policy hash"), el("dd", { class: "mono" }, r.policy_hash || "-"),
      el("dt", {}, "Expires in"), el("dd", {}, expires),
    ),
    el("label", { for: reasonId }, "Reason"),
    reason,
    approve,
    " ",
    deny,
    message,
  );
}

// ---- actions ----

async function renderActions(gen) {
  gen = gen === undefined ? ++generation : gen;
  show("actions");
  const params = new URLSearchParams();
  if ($("filter-state").value) params.set("state", $("filter-state").value);
  if ($("filter-capability").value.trim()) params.set("capability_id", $("filter-capability").value.trim());
  const body = $("actions-table").querySelector("tbody");
  body.replaceChildren();
  $("actions-status").textContent = "Loading…";
  try {
    const list = await api(`/aip/v1/actions?${params}`);
    if (!current(gen)) return;
    const actions = list.actions || [];
    $("actions-status").textContent = `${actions.length} action(s)`;
    for (const a of actions) {
      body.append(
        el(
          "tr",
          {},
          el("td", {}, el("a", { href: `#action/${encodeURIComponent(a.action_id)}`, class: "mono" }, a.action_id)),
          el("td", {}, a.state),
          el("td", {}, a.capability_id || "-"),
          el("td", {}, a.updated_at || "-"),
        ),
      );
    }
  } catch (e) {
    $("actions-status").textContent = e.message;
  }
}

async function renderAction(id, gen) {
  show("action");
  $("action-title").textContent = `Action ${id}`;
  for (const list of ["action-fields", "action-events", "action-chunks", "receipts"]) $(list).replaceChildren();
  $("verify-status").textContent = "";
  $("stream-status").textContent = "";
  $("verify").dataset.action = id;
  let view;
  try {
    view = await api(`/aip/v1/actions/${encodeURIComponent(id)}?include_result=true`);
  } catch (e) {
    if (!current(gen)) return;
    $("action-fields").append(el("dt", {}, "Error"), el("dd", { class: "error" }, e.message));
    return;
  }
  if (!current(gen)) return;
  renderFields(view);
  try {
    const page = await api(`/aip/v1/actions/${encodeURIComponent(id)}/events?limit=1000`);
    if (!current(gen)) return;
    for (const event of page.events || []) addEvent(event);
  } catch (e) {
    $("action-events").append(el("li", { class: "error" }, e.message));
  }
  follow(id);
}

function renderFields(view) {
  const fields = $("action-fields");
  fields.replaceChildren();
  const row = (name, value) => fields.append(el("dt", {}, name), el("dd", {}, value === undefined || value === null ? "-" : value));
  row("State", el("span", { id: "action-state" }, view.state));
  row("Capability", view.capability_id);
  row("Session", view.session_id);
  if (view.approval_id) row("Approval", el("span", { class: "mono" }, view.approval_id));
  if (view.transaction_id) row("Transaction", view.transaction_id);
  if (view.delegation_id) row("Delegation", view.delegation_id);
  row("Started", view.started_at);
  row("Updated", view.updated_at);
  const result = view.result;
  row("Result", result ? result.status : "none yet");
  if (result && result.output !== undefined) row("Output", el("code", {}, JSON.stringify(result.output)));
  if (result && result.error) row("Error", `${result.error.code}: ${result.error.message}`);
}

function addEvent(event) {
  $("action-events").append(el("li", {}, `${event.occurred_at} ${event.kind}`, event.data ? el("code", {}, ` ${JSON.stringify(event.data)}`) : null));
}

// The action's live stream (SSE over fetch, so the token stays in a header), resumed with
// Last-Event-ID after a dropped connection.
async function follow(id) {
  streamAbort = new AbortController();
  const signal = streamAbort.signal;
  let last = null;
  for (let attempt = 0; attempt < 10 && !signal.aborted; attempt++) {
    $("stream-status").textContent = attempt === 0 ? "Following…" : "Reconnecting…";
    try {
      const headers = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
      if (last) headers["Last-Event-ID"] = last;
      const response = await fetch(`/aip/v1/actions/${encodeURIComponent(id)}/events`, { headers, signal, credentials: "omit" });
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const raw = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const ev = { name: "message", id: null, data: "" };
          for (const line of raw.split("\n")) {
            if (line.startsWith("event:")) ev.name = line.slice(6).trim();
            else if (line.startsWith("id:")) ev.id = line.slice(3).trim();
            else if (line.startsWith("data:")) ev.data += line.slice(5).replace(/^ /, "");
          }
          if (ev.id) last = ev.id;
          if (!ev.data) continue;
          const envelope = JSON.parse(ev.data);
          if (ev.name === "chunk" || ev.name === "done") {
            const c = envelope.body.stream_chunk;
            $("action-chunks").append(el("li", {}, `#${c.sequence} ${c.kind}`, c.data !== undefined ? el("code", {}, ` ${JSON.stringify(c.data)}`) : null));
          } else if (ev.name === "result") {
            $("stream-status").textContent = `Finished: ${envelope.body.action_result.status}`;
            const view = await api(`/aip/v1/actions/${encodeURIComponent(id)}?include_result=true`);
            renderFields(view);
            const page = await api(`/aip/v1/actions/${encodeURIComponent(id)}/events?limit=1000`);
            $("action-events").replaceChildren();
            for (const event of page.events || []) addEvent(event);
            return;
          } else if (ev.name === "error") {
            $("stream-status").textContent = `Stream error: ${envelope.body.error.error.code}`;
            return;
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 300 * (attempt + 1)));
  }
}

// ---- receipt check (spec 18.2), recomputed here with WebCrypto ----

function canonical(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
}

async function sha256(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function verify() {
  const id = $("verify").dataset.action;
  const list = $("receipts");
  list.replaceChildren();
  $("verify-status").textContent = "Verifying…";
  let chain;
  try {
    chain = await api(`/aip/v1/receipts/${encodeURIComponent(id)}`);
  } catch (e) {
    $("verify-status").textContent = e.message;
    return;
  }
  let broken = null;
  let previous = null;
  const hashes = [];
  for (const [i, receipt] of (chain.receipts || []).entries()) {
    const { hash, ...rest } = receipt;
    const expected = await sha256(canonical(rest));
    let problem = null;
    if (expected !== hash) problem = `hash mismatch (recomputed ${expected.slice(0, 16)}…)`;
    else if (i === 0 && receipt.previous_hash) problem = "the first receipt names a previous hash";
    else if (i > 0 && receipt.previous_hash !== previous) problem = "previous_hash is not the prior receipt's hash";
    previous = hash;
    hashes.push(hash);
    const item = el("li", { class: problem && broken === null ? "broken" : "ok" }, `${receipt.receipt_type} `, el("span", { class: "mono" }, String(hash).slice(0, 16)), problem ? ` — broken: ${problem}` : "");
    if (problem && broken === null) broken = i;
    list.append(item);
  }
  const root = await sha256(hashes.join(""));
  if (broken === null && chain.root_hash !== root) broken = "root";
  $("verify-status").textContent =
    broken === null ? `Chain verified: ${hashes.length} receipts, root ${root.slice(0, 16)}…` : broken === "root" ? "Broken: the root hash does not match the receipts" : `Broken at receipt ${broken + 1} of ${hashes.length}`;
}

// ---- wiring ----

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    $("signin-error").textContent = "";
    me = null;
    if (location.hash === "" || location.hash === "#") location.hash = "approvals"; // routes on hashchange
    else route();
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    me = null;
    route();
  });
  $("actions-filter").addEventListener("submit", (e) => {
    e.preventDefault();
    renderActions();
  });
  $("verify").addEventListener("click", verify);
  window.addEventListener("hashchange", route);
  route();
});
