// Words and times for people on the floor (README "Operator page"). One time format everywhere
// on the page: 24-hour with the date, in the browser's own zone ("2026-12-06 14:03:07"), the
// zone and the UTC time on hover. A command's timeline in words, each entry from its fields.
// window.words = { time, timeEl, elapsed, value, reading, timeline }.
"use strict";

(function () {
  const pad = (n) => String(n).padStart(2, "0");
  const ZONE = (() => {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return ""; }
  })();

  // "2026-12-06 14:03:07" in the browser's zone; what it was given when that is no time.
  function time(iso) {
    const d = new Date(iso);
    if (!iso || isNaN(d)) return String(iso || "");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  // What hovering a time says: the zone it is shown in, and the same instant in UTC.
  function zone(iso) {
    const d = new Date(iso);
    if (!iso || isNaN(d)) return "";
    const m = -d.getTimezoneOffset();
    const off = "UTC" + (m < 0 ? "−" : "+") + pad(Math.floor(Math.abs(m) / 60)) + ":" + pad(Math.abs(m) % 60);
    return "local time (" + (ZONE ? ZONE + ", " : "") + off + "); " + d.toISOString() + " in UTC";
  }

  // A <time> element in the one format, the zone and UTC on hover.
  function timeEl(iso) {
    const e = document.createElement("time");
    if (iso) e.setAttribute("datetime", iso);
    e.title = zone(iso);
    e.textContent = time(iso);
    return e;
  }

  // A span of time: "120 ms", "1.3 s", "2 min 5 s".
  function elapsed(ms) {
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (Math.round(ms / 100) / 10) + " s";
    return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  }

  function value(v, unit) {
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "number") v = Math.round(v * 1000) / 1000;
    if (v !== null && typeof v === "object") v = Object.values(v).join(" ");
    return unit ? v + " " + unit : String(v);
  }

  // A signal's name for people: "position_mm" in mm reads "position", underscores as spaces.
  function label(name, unit) {
    const suffix = unit ? "_" + unit.toLowerCase() : null;
    const bare = suffix && name.toLowerCase().endsWith(suffix) ? name.slice(0, -suffix.length) : name;
    return bare.replace(/_/g, " ");
  }

  // "position 70.2 mm, moving yes" from `{position_mm: 70.2, moving: true}`.
  function reading(values, unitOf) {
    return Object.entries(values || {})
      .map(([k, v]) => label(k, unitOf(k)) + " " + value(v, unitOf(k))).join(", ");
  }

  // The fields of an entry nobody taught this page, as "key value" pairs (no JSON).
  function fields(data) {
    return Object.entries(data)
      .filter(([, v]) => v !== null && typeof v !== "object")
      .map(([k, v]) => k.replace(/_/g, " ") + " " + v).join(", ");
  }

  const TERMINAL = ["completed", "failed", "timeout", "cancelled", "rejected", "sent"];

  // What a verdict says: its status, its code and detail, and for a completion what decided it.
  function verdict(e, c, unitOf) {
    const deciding = Object.fromEntries(Object.entries(c.evidence || {}).map(([k, r]) => [k, r && r.value]));
    // "cancelled CANCELLED" says it twice: a code is named when it says more than the status.
    const code = e.code && e.code.toLowerCase() !== e.event ? " " + e.code : "";
    let text = e.event + code;
    if (e.event === "completed") {
      const read = reading(deciding, unitOf);
      text += e.already ? ": it already was so" : read ? ": read " + read : "";
    } else if (e.event === "sent") {
      text += ": written, with nothing to read back whether the device acted";
    }
    return e.detail ? text + ": " + e.detail : text;
  }

  // One entry in words.
  function describe(e, c, unitOf) {
    const { at, event, ...data } = e;
    if (TERMINAL.includes(event)) return verdict(e, c, unitOf);
    switch (event) {
      case "received": return "received";
      case "accepted": return "accepted" + (e.confirmed_by ? ", confirmed by " + e.confirmed_by : "") +
        (e.handed_to ? ", handed to gateway " + e.handed_to : "");
      case "dispatched": return "written to the device" +
        (typeof e.expect_s === "number" ? " (should take about " + elapsed(e.expect_s * 1000) + ")" : "");
      case "device_ack": return "device acknowledged";
      case "signal": return "reading: " + (reading(e.values, unitOf) || "nothing");
      case "retry": return "write failed, trying again (attempt " + e.attempt + ")" + (e.after ? ": " + e.after : "");
      case "cancel_sent": return "cancel written to the device";
      case "claimed": return "taken over" + (e.by ? " by gateway " + e.by : "");
      case "recovered": return "picked up again after a restart" + (e.by ? " by gateway " + e.by : "");
      case "internal_error": return "closedloop itself failed: " + (e.message || "no message");
      case "omitted": return e.omitted + " readings not shown";
      default: {
        const rest = fields(data);
        return event.replace(/_/g, " ") + (rest ? ": " + rest : "");
      }
    }
  }

  // The timeline as <li>s: a run of more than three readings shows its first and last, with
  // how many stand between.
  function timeline(c, unitOf) {
    const tl = c.timeline || [];
    const t0 = tl.length ? Date.parse(tl[0].at) : 0;
    const item = (e) => {
      const li = document.createElement("li");
      li.dataset.event = e.event;
      const rel = document.createElement("span");
      rel.className = "rel";
      rel.textContent = "+" + elapsed(Date.parse(e.at) - t0);
      li.append(timeEl(e.at), " ", rel, " ", describe(e, c, unitOf));
      if (e.event === "dispatched" && Array.isArray(e.writes)) li.title = "writes: " + e.writes.join("; ");
      return li;
    };
    const items = [];
    for (let i = 0; i < tl.length;) {
      let j = i;
      while (j < tl.length && tl[j].event === "signal") j++;
      if (j - i > 3) {
        const more = document.createElement("li");
        more.className = "readings";
        more.textContent = "… " + (j - i - 2) + " more readings …";
        items.push(item(tl[i]), more, item(tl[j - 1]));
        i = j;
      } else {
        items.push(item(tl[i]));
        i++;
      }
    }
    return items;
  }

  window.words = { time, zone, timeEl, elapsed, value, label, reading, timeline };
})();
