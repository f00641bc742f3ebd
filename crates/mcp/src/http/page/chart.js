// One command's timeline as an inline SVG chart (docs/http.md, "Operator page"): time from `received`
// to the verdict, one lane per signal its timeline read (the signals of `done_when` and the
// evidence), the device's acknowledgement and the verdict marked. window.chart(result) -> <svg>.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const TERMINAL = ["completed", "failed", "timeout", "cancelled", "rejected", "sent"];
  const COLORS = ["#0b5fff", "#d4380d", "#1a7f37", "#8250df", "#9a6700", "#bf3989"];
  const W = 760, LEFT = 120, RIGHT = 24, TOP = 30, AXIS = 30;

  function node(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // { name: [[ms, value, isBool]] } from the timeline's `signal` entries, each at the time it was
  // read (`read_at`; journaled entries are written later, the deciding one with the verdict),
  // then the evidence's readings (each with its own time) where they are newer.
  function series(timeline, evidence) {
    const out = new Map();
    const add = (name, t, v) => {
      if (typeof v !== "number" && typeof v !== "boolean") return;
      if (!out.has(name)) out.set(name, []);
      const points = out.get(name);
      if (!points.length || t > points[points.length - 1][0]) points.push([t, Number(v), typeof v === "boolean"]);
    };
    for (const e of timeline) {
      if (e.event !== "signal" || !e.values) continue;
      const t = Date.parse(e.read_at || e.at);
      for (const [name, v] of Object.entries(e.values)) add(name, t, v);
    }
    for (const [name, r] of Object.entries(evidence || {})) {
      if (r && r.at) add(name, Date.parse(r.at), r.value);
    }
    return out;
  }

  function lane(svg, name, points, y, h, x, color) {
    const isBool = points[0][2];
    let lo = Math.min(...points.map((p) => p[1])), hi = Math.max(...points.map((p) => p[1]));
    if (isBool) { lo = 0; hi = 1; }
    if (hi === lo) { hi = lo + 1; }
    const py = (v) => y + h - ((v - lo) / (hi - lo)) * h;
    // Each lane's top and bottom lines are its highest and lowest reading (yes and no, as the
    // device cards say a boolean).
    for (const [v, label] of [[hi, isBool ? "yes" : +hi.toFixed(3)], [lo, isBool ? "no" : +lo.toFixed(3)]]) {
      svg.append(node("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: py(v), y2: py(v) }));
      svg.append(node("text", { x: LEFT - 6, y: py(v), "text-anchor": "end" }, String(label)));
    }
    svg.append(node("text", { x: 6, y: y + h / 2, "data-series": name }, name));
    const pts = [];
    for (let i = 0; i < points.length; i++) {
      const [t, v] = points[i];
      // Booleans hold their value until the next reading: a step, not a slope.
      if (isBool && i > 0) pts.push(x(t).toFixed(1) + "," + py(points[i - 1][1]).toFixed(1));
      pts.push(x(t).toFixed(1) + "," + py(v).toFixed(1));
    }
    if (pts.length === 1) pts.push((Number(pts[0].split(",")[0]) + 2) + "," + pts[0].split(",")[1]);
    const last = points[points.length - 1];
    const line = node("polyline", { class: "series", points: pts.join(" "), stroke: color, "data-series": name,
      "data-last": isBool ? String(Boolean(last[1])) : String(last[1]) });
    line.append(node("title", {}, name + ": " + points.length + " reading(s)"));
    svg.append(line);
    // Each reading a dot where it was read: the one that decided stands before the verdict.
    for (const [t, v] of points) {
      const dot = node("circle", { class: "reading", cx: x(t).toFixed(1), cy: py(v).toFixed(1), r: 2.5,
        fill: color, "data-series": name, "data-at": new Date(t).toISOString() });
      const at = new Date(t).toISOString();
      dot.append(node("title", {}, name + " = " + window.words.value(isBool ? Boolean(v) : v) + " read at " +
        window.words.time(at) + " (" + window.words.zone(at) + ")"));
      svg.append(dot);
    }
  }

  function marks(svg, timeline, x, bottom) {
    for (const e of timeline) {
      const ack = e.event === "device_ack";
      const verdict = TERMINAL.includes(e.event);
      if (!ack && !verdict && e.event !== "cancel_sent") continue;
      const cx = x(Date.parse(e.at));
      const cls = "mark " + (ack ? "ack" : verdict ? "verdict " + e.event : "ack");
      svg.append(node("line", { class: cls, x1: cx, x2: cx, y1: TOP - 6, y2: bottom, "data-mark": e.event }));
      const label = ack ? "ack" : e.event === "cancel_sent" ? "cancel sent" : e.event;
      const anchor = cx > W - 90 ? "end" : "start";
      svg.append(node("text", { class: "mark-label", x: cx + (anchor === "end" ? -4 : 4),
        y: verdict ? TOP - 14 : TOP + 2, "text-anchor": anchor }, label));
    }
  }

  // Ticks at round steps — 1, 2 or 5 × 10^k ms, about five over `span` ms — each labelled as its
  // step fits: "0 ms, 20 ms, 40 ms" under a second, "0.0 s, 0.5 s, 1.0 s" or "0 s, 2 s, 4 s" above.
  function ticks(span) {
    const rough = span / 5;
    const mag = Math.pow(10, Math.floor(Math.log10(rough)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= rough * 0.999);
    const seconds = span >= 1000;
    const digits = (unit) => Math.max(0, -Math.floor(Math.log10(step / unit) + 1e-9));
    const out = [];
    for (let i = 0; i * step <= span * (1 + 1e-9); i++) {
      const t = i * step;
      const label = seconds ? (t / 1000).toFixed(digits(1000)) + " s" : t.toFixed(digits(1)) + " ms";
      out.push([t, label]);
    }
    return out;
  }

  function axis(svg, t0, t1, x, y) {
    svg.append(node("line", { class: "axis", x1: LEFT, x2: W - RIGHT, y1: y, y2: y }));
    for (const [t, label] of ticks(t1 - t0)) {
      const at = x(t0 + t);
      svg.append(node("line", { class: "axis", x1: at, x2: at, y1: y, y2: y + 4 }));
      const anchor = at > W - RIGHT - 24 ? "end" : "middle";
      svg.append(node("text", { class: "tick", x: at, y: y + 15, "text-anchor": anchor, "data-ms": t }, label));
    }
  }

  window.chart = function (c) {
    const tl = c.timeline || [];
    const t0 = tl.length ? Date.parse(tl[0].at) : Date.now();
    const end = tl.find((e) => TERMINAL.includes(e.event));
    let t1 = end ? Date.parse(end.at) : Date.now();
    if (!(t1 > t0)) t1 = t0 + 1;
    const took = t1 - t0;
    // A little room after the verdict, so its marker does not sit on the chart's edge.
    t1 += (t1 - t0) * 0.04;
    const x = (t) => LEFT + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (W - LEFT - RIGHT);
    const all = series(tl, c.evidence);
    const heights = [...all.values()].map((p) => (p[0][2] ? 26 : 90));
    const plot = heights.reduce((a, h) => a + h + 22, 0) || 40;
    const H = TOP + plot + AXIS;
    const svg = node("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
      "aria-label": "Timeline of " + c.device + " " + c.action + ": " + c.status + " after " + window.words.elapsed(took) });
    let y = TOP + 12, i = 0;
    for (const [name, points] of all) {
      lane(svg, name, points, y, heights[i], x, COLORS[i % COLORS.length]);
      y += heights[i] + 22;
      i++;
    }
    if (!all.size) svg.append(node("text", { x: LEFT, y: TOP + 24 }, "no readings recorded"));
    marks(svg, tl, x, TOP + plot);
    axis(svg, t0, t1, x, TOP + plot);
    return svg;
  };
  // The axis's ticks over a span, [[ms, label]], for the page's tests.
  window.chart.ticks = ticks;
})();
