// The operator page (docs/http.md, "Operator page"): devices and commands live over SSE, one
// command's timeline as a chart, and cancel. Plain DOM; data only ever set as text.
"use strict";

const $ = (id) => document.getElementById(id);
const words = window.words;
const SVG = "http://www.w3.org/2000/svg";
const ACTIVE = ["accepted", "running"];
const page = { devices: new Map(), mayCancel: new Map(), selected: null, refresh: null };

function el(tag, attrs, ...children) {
  const ns = ["svg", "line", "polyline", "text", "rect", "g", "title"].includes(tag);
  const e = ns ? document.createElementNS(SVG, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

async function getJSON(url, opts) {
  const r = await fetch(url, Object.assign({ credentials: "same-origin" }, opts));
  // Signed out (or the token is gone): the server shows the sign-in form at /.
  if (r.status === 401) { location.assign("/"); throw new Error("signed out"); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
  return body;
}

// Runs `fn` now, or once more after the run in progress: bursts of events cost one fetch.
function coalesced(fn) {
  let running = false, again = false;
  const run = async () => {
    if (running) { again = true; return; }
    running = true;
    try { await fn(); } catch (e) { notice(e.message, true); }
    running = false;
    if (again) { again = false; run(); }
  };
  return run;
}

function notice(text, error) {
  const n = $("notice");
  n.textContent = text;
  n.classList.toggle("error", !!error);
}

const fmtValue = (v, unit) => window.words.value(v, unit);

function fmtAge(ms, retained) {
  if (ms === null || ms === undefined) return "retained, age unknown";
  const age = ms < 1000 ? (ms / 1000).toFixed(1) + " s"
    : ms < 60000 ? Math.round(ms / 1000) + " s"
    : Math.round(ms / 60000) + " min";
  return retained ? age + ", retained" : age;
}

// ---- devices ----

function renderDevice(name) {
  const d = page.devices.get(name);
  const st = d.state || { liveness: "unknown", signals: {} };
  const live = st.liveness;
  // A signal whose last read failed shows its last good value, as old as it is, marked so.
  const refused = st.unreadable || {};
  const rows = Object.entries(st.signals || {}).map(([sig, s]) => {
    const why = refused[sig];
    return el("tr", { "data-signal": sig, "data-age": s.age_ms, "data-retained": !!s.retained, class: why ? "unreadable" : "" },
      el("th", { scope: "row" }, sig),
      el("td", { class: "value", title: why ? "cannot be read since " + words.time(why.since) + ": " + why.detail : "" },
        fmtValue(s.value, s.unit), why ? el("span", { class: "refused" }, " unreadable") : null),
      el("td", { class: "age", title: !s.at ? "a retained message, sent at an unknown earlier time"
        : (s.retained ? "a retained message, taken at " : "read at ") + words.time(s.at) + ", " + words.zone(s.at) }, fmtAge(s.age_ms, s.retained)));
  });
  const how = d.reporting || {};
  const li = el("li", { class: "device", "data-device": name, "data-liveness": live },
    el("h3", {}, name, el("span", { class: "live " + live }, live)),
    el("p", {}, d.info.description),
    how.text ? el("p", { class: "reporting", "data-reporting": how.kind }, how.text) : null,
    st.owner ? el("p", { class: "owner" }, "owner: " + st.owner + " (epoch " + st.epoch + ")") : null,
    (st.alarms || []).length ? el("p", { class: "alarm" }, "alarm: " + st.alarms.join(", ")) : null,
    st.detail ? el("p", {}, st.detail) : null,
    rows.length ? el("table", { class: "signals" }, el("tbody", {}, ...rows))
      : el("p", {}, "no reading yet"));
  const old = document.querySelector('.device[data-device="' + CSS.escape(name) + '"]');
  if (old) old.replaceWith(li); else $("devices").append(li);
}

function onDevice(name, state) {
  const d = page.devices.get(name);
  if (!d) return;
  d.state = state;
  d.received = performance.now();
  renderDevice(name);
}

// Ages go on between events: what the server said plus the time since.
function tickAges() {
  for (const [name, d] of page.devices) {
    const li = document.querySelector('.device[data-device="' + CSS.escape(name) + '"]');
    if (!li || !d.state) continue;
    const since = performance.now() - d.received;
    // A row without an age (retained, no time in it) has none to go on.
    for (const tr of li.querySelectorAll("tr[data-signal][data-age]")) {
      const age = Number(tr.dataset.age) + since;
      tr.querySelector(".age").textContent = fmtAge(age, tr.hasAttribute("data-retained"));
      tr.classList.toggle("old", age > 5000);
    }
  }
}

// Who is looking: the local user (no sign-in on this address) or the name of the access code.
function showWho(s) {
  const who = $("who");
  who.dataset.local = s.local_user;
  if (s.local_user) {
    who.textContent = "local user (no sign-in on this address)";
    who.title = "The plant declares no access codes: anyone on this computer may watch and cancel.";
  } else {
    who.textContent = "signed in as " + s.caller;
    who.title = s.devices.some((d) => d.may_cancel) ? "may watch, and cancel commands of " +
      s.devices.filter((d) => d.may_cancel).map((d) => d.info.device).join(", ") : "may watch";
  }
  $("signout").hidden = !s.needs_sign_in;
}

async function loadState() {
  const s = await getJSON("/page/state");
  $("plant").textContent = s.plant;
  showWho(s);
  const filter = $("f-device");
  for (const d of s.devices) {
    page.devices.set(d.info.device, { info: d.info, state: d.state, reporting: d.reporting, received: performance.now() });
    page.mayCancel.set(d.info.device, d.may_cancel);
    renderDevice(d.info.device);
    if (![...filter.options].some((o) => o.value === d.info.device)) {
      filter.append(el("option", { value: d.info.device }, d.info.device));
    }
  }
}

// ---- commands ----

function cancelButton(c) {
  if (!ACTIVE.includes(c.status) || !page.mayCancel.get(c.device)) return null;
  const b = el("button", { type: "button", class: "danger cancel", "data-command-id": c.command_id,
    "aria-label": "Cancel " + c.device + " " + c.action + " " + c.command_id.slice(-8) }, "Cancel");
  b.addEventListener("click", () => cancel(c));
  return b;
}

function commandRow(c) {
  const show = el("button", { type: "button", class: "link show", title: c.command_id,
    "aria-label": "Show the timeline of " + c.device + " " + c.action + " " + c.command_id.slice(-8) },
    "…" + c.command_id.slice(-8));
  show.addEventListener("click", () => select(c.command_id));
  return el("tr", { "data-command-id": c.command_id, "data-status": c.status, "data-updated": c.updated_at,
      class: c.command_id === page.selected ? "selected" : null },
    el("td", {}, show), el("td", {}, c.device), el("td", {}, c.action),
    el("td", {}, el("span", { class: "status " + c.status }, c.status)),
    el("td", {}, words.timeEl(c.updated_at)),
    el("td", {}, cancelButton(c)));
}

const loadCommands = coalesced(async () => {
  const q = new URLSearchParams({ device: $("f-device").value, status: $("f-status").value });
  const { commands } = await getJSON("/page/commands?" + q);
  const body = $("commands").tBodies[0];
  // Keep the focused button's place: replace rows, then give focus back to the same control.
  const focused = document.activeElement;
  const key = focused && focused.closest("tr") && focused.closest("tr").dataset.commandId;
  const cls = focused && focused.classList.contains("cancel") ? ".cancel" : ".show";
  $("commands-empty").hidden = commands.length > 0;
  const same = body.rows.length === commands.length &&
    commands.every((c, i) => body.rows[i].dataset.commandId === c.command_id);
  if (same) {
    // The same commands: only the rows that changed are redrawn, the rest keep focus and clicks.
    commands.forEach((c, i) => {
      const r = body.rows[i];
      if (r.dataset.status !== c.status || r.dataset.updated !== c.updated_at) r.replaceWith(commandRow(c));
    });
  } else {
    body.replaceChildren(...commands.map(commandRow));
  }
  if (key && !(document.activeElement && document.activeElement.closest("tbody"))) {
    const row = 'tr[data-command-id="' + CSS.escape(key) + '"] ';
    // A cancelled command has no Cancel button any more: focus goes to its row's link.
    const again = body.querySelector(row + cls) || body.querySelector(row + ".show");
    if (again) again.focus();
  }
});

async function cancel(c) {
  const what = c.device + " " + c.action + " (" + c.command_id.slice(-8) + ")";
  if (!window.confirm("Cancel " + what + "? The device's cancel plan will be written.")) return;
  notice("Cancelling " + what + "…");
  try {
    const r = await getJSON("/page/commands/" + encodeURIComponent(c.command_id) + "/cancel",
      { method: "POST", headers: { "X-Closedloop-Action": "cancel" } });
    notice(what + ": " + r.status + (r.detail ? " — " + r.detail : ""), r.status !== "cancelled");
    select(c.command_id);
  } catch (e) {
    notice("Cancel of " + what + " failed: " + e.message, true);
  }
  loadCommands();
}

async function select(id) {
  page.selected = id;
  for (const tr of $("commands").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.commandId === id);
  await loadDetail();
  $("detail").hidden = false;
}

const loadDetail = coalesced(async () => {
  if (!page.selected) return;
  const c = await getJSON("/page/commands/" + encodeURIComponent(page.selected));
  const d = $("detail");
  d.dataset.commandId = c.command_id;
  d.dataset.status = c.status;
  $("detail-h").textContent = c.device + " " + c.action + " — " + c.status;
  const params = Object.entries(c.params || {}).map(([k, v]) => k + " = " + fmtValue(v)).join(", ");
  const facts = [["command", c.command_id], ["asked for", params || "no parameters"],
    ["status", c.status + (c.verified ? " (verified)" : "")],
    ["accepted", c.accepted_at && words.timeEl(c.accepted_at)], ["updated", words.timeEl(c.updated_at)],
    ["error", c.error_code], ["detail", c.detail], ["hint", c.hint]];
  $("facts").replaceChildren(...facts.filter(([, v]) => v).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("chart").replaceChildren(window.chart(c));
  const units = page.devices.get(c.device)?.state?.signals || {};
  $("timeline").replaceChildren(...words.timeline(c, (sig) => units[sig]?.unit));
  $("raw").textContent = JSON.stringify(c.timeline, null, 1);
  // Readings are not state changes (no event comes for them): while the command runs its
  // chart is read again every second.
  clearTimeout(page.refresh);
  if (ACTIVE.includes(c.status)) page.refresh = setTimeout(loadDetail, 1000);
});

// ---- live feed ----

function connect() {
  const es = new EventSource("/page/events");
  const link = $("link");
  // After a reconnect, what changed meanwhile is read again (devices come with the stream).
  es.onopen = () => { link.dataset.state = "live"; link.textContent = "live"; loadCommands(); };
  es.onerror = () => {
    link.dataset.state = "down";
    link.textContent = "reconnecting…";
    // The browser retries a dropped stream itself, but not one refused (signed out, server
    // gone): then the state is asked for (which goes to the sign-in form on 401) and a new
    // stream opened.
    if (es.readyState === EventSource.CLOSED) {
      setTimeout(() => loadState().then(connect, (e) => { notice(e.message, true); setTimeout(connect, 3000); }), 3000);
    }
  };
  es.addEventListener("device", (e) => { const d = JSON.parse(e.data); onDevice(d.device, d.state); });
  es.addEventListener("command", (e) => {
    const c = JSON.parse(e.data);
    loadCommands();
    if (c.command_id === page.selected) loadDetail();
  });
  es.addEventListener("resync", () => { loadCommands(); loadDetail(); });
}

async function start() {
  $("f-device").addEventListener("change", loadCommands);
  $("f-status").addEventListener("change", loadCommands);
  try { await loadState(); } catch (e) { notice(e.message, true); return; }
  connect();
  loadCommands();
  setInterval(tickAges, 1000);
}

document.addEventListener("DOMContentLoaded", start);
