// The embodia run viewer: a list of runs, one run's synchronised views, two runs side by side.
// Plain DOM and SVG, no external assets; every number drawn comes from /api (the runs' files).
"use strict";

const app = document.getElementById("app");
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function fileUrl(run, name) {
  return "/files/" + (run.id ? run.id.split("/").map(encodeURIComponent).join("/") + "/" : "") + encodeURIComponent(name);
}

async function getJSON(url) {
  const response = await fetch(url);
  let body;
  try {
    body = await response.json();
  } catch (e) {
    throw new Error(`the server answered ${response.status} without JSON`);
  }
  if (!response.ok) throw new Error(body.error || `the server answered ${response.status}`);
  return body;
}

function showError(message) {
  app.replaceChildren(el("p", { class: "error", role: "alert", id: "error", text: message }));
}

function fmt(v) {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
  return v == null ? "-" : String(v);
}

function summaryText(summary) {
  return Object.entries(summary || {}).map(([k, v]) => `${k} ${fmt(v)}`).join(" · ");
}

// ------------------------------------------------------------------ list of runs

async function listRuns() {
  const data = await getJSON("/api/runs");
  document.getElementById("root").textContent = data.root;
  if (!data.runs.length) {
    app.replaceChildren(el("p", { class: "error", id: "error", text: `no runs under ${data.root}` }));
    return;
  }
  const picked = new Set();
  const byId = new Map(data.runs.map((run) => [run.id, run]));
  const compare = el("button", { id: "compare", disabled: "", text: "compare the two ticked runs" });
  const why = el("span", { id: "compare-refused", class: "error" });
  compare.addEventListener("click", () => {
    const [a, b] = [...picked];
    location.hash = `#/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
  });
  const rows = data.runs.map((run) => {
    const box = el("input", { type: "checkbox", "aria-label": `pick ${run.id}` });
    box.addEventListener("change", () => {
      box.checked ? picked.add(run.id) : picked.delete(run.id);
      const refused = picked.size === 2 ? pairingRefused(...[...picked].map((id) => byId.get(id))) : null;
      compare.disabled = picked.size !== 2 || refused !== null;
      why.textContent = refused || "";
    });
    return el(
      "tr",
      { "data-run-id": run.id, "data-kind": run.kind },
      el("td", {}, box),
      el("td", {}, el("a", { href: `#/run?id=${encodeURIComponent(run.id)}`, text: run.id || "(this folder)" })),
      el("td", { text: run.kind }),
      run.error ? el("td", { class: "error", text: run.error }) : el("td", { class: "summary", text: summaryText(run.summary) }),
    );
  });
  const head = el("tr", {}, el("th"), el("th", { text: "run" }), el("th", { text: "kind" }), el("th", { text: "summary" }));
  app.replaceChildren(el("table", { id: "runs" }, el("thead", {}, head), el("tbody", {}, ...rows)), el("p", {}, compare, " ", why));
}

const TIME_AXES = { step: "exploration steps", second: "stream seconds" };

function pairingRefused(a, b) {
  // One slider steps both runs: they must count time alike (two runs without a time axis are
  // shown side by side). The reason, or null when the pair can be shown.
  const [ua, ub] = [a.time_unit ?? null, b.time_unit ?? null];
  if (ua === ub) return null;
  const axis = (run, unit) => (unit ? `steps through ${TIME_AXES[unit] || unit}` : `has no time axis (a ${run.kind} run)`);
  return `cannot compare ${a.id || "(this folder)"} with ${b.id || "(this folder)"}: ${a.id || "the first"} ${axis(a, ua)}, ` +
    `${b.id || "the second"} ${axis(b, ub)}; they share no time unit to step through together`;
}

// ------------------------------------------------------------------ shared drawing

function extent(values) {
  // a loop, not Math.min(...values): long runs overflow the call stack with spreads
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

function lineChart(points, { cursorX = null, label = "", xRange = null, yRange = null } = {}) {
  const W = 320, H = 160, P = 28;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
  if (!points.length) return root;
  const [xa, xb] = xRange || extent(points.map((p) => p[0]));
  const [ya, yb] = yRange || extent(points.map((p) => p[1]));
  const [x0, x1] = [xa, xb || 1];
  const [y0, y1] = [Math.min(0, ya), yb || 1];
  const sx = (x) => P + ((x - x0) / (x1 - x0 || 1)) * (W - 2 * P);
  const sy = (y) => H - P + 4 - ((y - y0) / (y1 - y0 || 1)) * (H - 2 * P);
  root.append(svg("line", { x1: P, y1: H - P + 4, x2: W - P, y2: H - P + 4, stroke: "#999" }));
  root.append(svg("polyline", { points: points.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" "), fill: "none", stroke: "#1f6fb2", "stroke-width": 2 }));
  const caption = svg("text", { x: P, y: 14, "font-size": 11, fill: "#333" });
  caption.textContent = `${label}: ${fmt(y0)} .. ${fmt(y1)} over ${fmt(x0)} .. ${fmt(x1)}`;
  root.append(caption);
  const cursor = svg("line", { class: "cursor", y1: P - 8, y2: H - P + 4, stroke: "#d33", "stroke-width": 1.5 });
  root.append(cursor);
  root.moveCursor = (x) => {
    cursor.setAttribute("x1", sx(x));
    cursor.setAttribute("x2", sx(x));
  };
  if (cursorX != null) root.moveCursor(cursorX);
  return root;
}

function view(id, title, ...children) {
  return el("figure", { class: "view", "data-view": id, "data-step": "" }, el("h4", { text: title }), ...children);
}

// ------------------------------------------------------------------ exploration runs

class ExplorePanel {
  constructor(run, { maxSteps = null } = {}) {
    this.run = run;
    this.count = run.steps.length;
    this.node = el("section", { class: "panel", "data-run-id": run.id });
    this.node.append(el("h3", { text: run.id || "(this folder)" }), el("p", { class: "summary", text: summaryText(run.summary) }));
    const views = el("div", { class: "views" });
    this.views = {};
    const waypoints = run.unit === "decision";
    const frameTitle = waypoints ? "what it saw when deciding: panorama (candidates, the chosen one ringed) | BEV" : "panorama | BEV before this step";
    if (run.video) {
      this.video = el("video", { src: fileUrl(run, run.video.file), muted: "", preload: "auto", playsinline: "" });
      this.marker = el("div", { class: "marker" });
      this.views.frame = view("frame", frameTitle, el("div", { class: "frame-wrap" }, this.video, this.marker));
    } else {
      const why = run.video_error || "this run wrote no episode.mp4";
      this.views.frame = view("frame", frameTitle, el("p", { class: "muted video-error", text: why }));
    }
    this.views.frame.classList.add("wide");
    this.views.trajectory = view("trajectory", "trajectory: ring where it decided, dot where that led", this.trajectorySvg());
    this.views.tree = run.tree
      ? view("tree", "topological tree", this.treeSvg())
      : view("tree", "topological tree", el("p", { class: "muted", text: "this agent keeps no tree" }));
    // x is primitive steps and y the whole 0..1 ratio, so two runs' curves read alike
    const last = run.steps.length ? run.steps[run.steps.length - 1].steps : 1;
    this.coverage = lineChart(run.steps.map((s) => [s.steps, s.coverage_ratio ?? 0]), {
      label: "coverage ratio by primitive step", xRange: [0, maxSteps || last], yRange: [0, 1],
    });
    this.views.coverage = view("coverage", "coverage after it", this.coverage);
    this.decision = el("div");
    this.views.decision = view("decision", "prompt, answer, decision", this.decision);
    this.views.decision.classList.add("wide");
    for (const v of Object.values(this.views)) views.append(v);
    this.node.append(views);
  }

  trajectorySvg() {
    const poses = this.run.steps.map((s) => s.pose).filter(Boolean);
    const root = svg("svg", { viewBox: "0 0 200 200", role: "img", "aria-label": "trajectory" });
    if (!poses.length) return root;
    const [x0, x1] = extent(poses.map((p) => p[0]));
    const [z0, z1] = extent(poses.map((p) => p[2]));
    const span = Math.max(x1 - x0, z1 - z0, 1e-6);
    const px = (p) => [10 + ((p[0] - x0) / span) * 180, 10 + ((p[2] - z0) / span) * 180];
    root.append(svg("polyline", { points: poses.map((p) => px(p).join(",")).join(" "), fill: "none", stroke: "#ccc", "stroke-width": 2 }));
    this.pathDone = svg("polyline", { fill: "none", stroke: "#1f6fb2", "stroke-width": 2.5 });
    this.agent = svg("circle", { r: 5, fill: "#d33" });
    this.origin = svg("circle", { r: 7, fill: "none", stroke: "#d33", "stroke-width": 2 });
    root.append(this.pathDone, this.origin, this.agent);
    this.project = px;
    return root;
  }

  treeSvg() {
    const tree = this.run.tree;
    const root = svg("svg", { viewBox: "0 0 320 200", role: "img", "aria-label": "tree" });
    if (!tree || !Array.isArray(tree.nodes)) return root;
    const edges = tree.edges || tree.links || [];
    // A node appears with the decision that made it: waypoints carry theirs, the others
    // appear with the last waypoint inserted before them (regions found after a move).
    // Maps, not objects: node ids come from files ("__proto__" is a valid id there)
    let current = 0;
    const appear = new Map(), kind = new Map(), children = new Map();
    for (const n of tree.nodes) {
      if (typeof n.decision === "number") current = n.decision;
      appear.set(n.id, typeof n.decision === "number" ? n.decision : current);
      kind.set(n.id, n.kind);
    }
    for (const e of edges) {
      if (!children.has(e.source)) children.set(e.source, []);
      children.get(e.source).push(e.target);
    }
    const depth = new Map(), order = [];
    const queue = tree.nodes.length ? [[tree.nodes[0].id, 0]] : [];
    while (queue.length) {
      const [id, d] = queue.shift();
      if (depth.has(id)) continue; // a cycle or a second parent: first visit wins
      depth.set(id, d);
      order.push(id);
      for (const c of children.get(id) || []) queue.push([c, d + 1]);
    }
    const levels = new Map();
    for (const id of order) {
      if (!levels.has(depth.get(id))) levels.set(depth.get(id), []);
      levels.get(depth.get(id)).push(id);
    }
    const maxDepth = Math.max(1, extent([...levels.keys()])[1]);
    const pos = new Map();
    for (const [d, ids] of levels) ids.forEach((id, i) => pos.set(id, [((i + 1) / (ids.length + 1)) * 320, 14 + (d / maxDepth) * 172]));
    this.treeParts = [];
    for (const e of edges) {
      if (!pos.has(e.source) || !pos.has(e.target)) continue;
      const [a, b] = [pos.get(e.source), pos.get(e.target)];
      const line = svg("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], stroke: "#aaa" });
      root.append(line);
      this.treeParts.push([line, Math.max(appear.get(e.source), appear.get(e.target))]);
    }
    for (const id of order) {
      const k = kind.get(id);
      const colour = k === "waypoint" ? "#1f6fb2" : k === "region" ? "#2a9d4b" : "#333";
      const dot = svg("circle", { cx: pos.get(id)[0], cy: pos.get(id)[1], r: k === "waypoint" ? 4 : 6, fill: colour, "data-node": id });
      const title = svg("title");
      title.textContent = id;
      dot.append(title);
      root.append(dot);
      this.treeParts.push([dot, appear.get(id)]);
    }
    return root;
  }

  show(k) {
    const step = Math.max(1, Math.min(k, this.count));
    const s = this.run.steps[step - 1];
    if (!s) {
      this.decision.replaceChildren(el("p", { class: "muted", text: "this run recorded no decisions" }));
      return;
    }
    if (this.video && this.run.video.fps > 0) {
      // frame k - 1 is what decision k was made on (frame 0 is the start)
      const last = Math.max(0, (this.run.video.frames || step) - 1);
      this.video.currentTime = (Math.min(step - 1, last) + 0.5) / this.run.video.fps;
      this.video.dataset.frame = String(Math.min(step - 1, last));
      const c = s.choice || {}, pano = this.run.panorama || {};
      if (c.kind === "pixel" && pano.width && pano.height) {
        // the frame is panorama (2h wide) then BEV (h): the panorama is the left two thirds
        this.marker.style.left = `${(c.col / pano.width) * (200 / 3)}%`;
        this.marker.style.top = `${(c.row / pano.height) * 100}%`;
        this.marker.style.display = "block";
      } else {
        this.marker.style.display = "none";
      }
    }
    if (this.project) {
      const done = this.run.steps.slice(0, step).map((x) => x.pose).filter(Boolean);
      this.pathDone.setAttribute("points", done.map((p) => this.project(p).join(",")).join(" "));
      for (const [mark, pose] of [[this.agent, s.pose], [this.origin, step > 1 ? this.run.steps[step - 2].pose : null]]) {
        mark.style.display = pose ? "" : "none";
        if (pose) {
          const [x, y] = this.project(pose);
          mark.setAttribute("cx", x);
          mark.setAttribute("cy", y);
        }
      }
    }
    for (const [part, at] of this.treeParts || []) part.style.display = at <= step ? "" : "none";
    if (this.coverage.moveCursor) this.coverage.moveCursor(s.steps);
    this.decision.replaceChildren(...this.decisionParts(s, step));
    for (const v of Object.values(this.views)) v.dataset.step = String(step);
  }

  indexAt(progress) {
    // the last decision made by this many primitive steps (at least the first)
    let index = 1;
    this.run.steps.forEach((s, i) => { if (s.steps <= progress) index = i + 1; });
    return index;
  }

  decisionParts(s, step) {
    const c = s.choice || {};
    const what = s.action != null ? `action ${s.action}`
      : c.kind === "point" ? `walk back to ${c.to || "a known point"}` : `candidate ${fmt(c.index)}`;
    const by = s.action != null ? "" : ` by ${c.by || "?"}`;
    const parts = [
      el("p", { class: "decided", text: `${this.run.unit} ${s.decision ?? step} of ${this.count}: ${what}${by}` +
        (c.fallback ? " (fallback: no readable answer)" : "") + `; after it: coverage ${fmt(s.coverage_ratio)} at step ${fmt(s.steps)}` }),
    ];
    if (s.rejection) parts.push(el("p", { class: "error", text: `rejected: ${JSON.stringify(s.rejection)}` }));
    if (s.prompt) parts.push(el("h4", { text: "prompt" }), el("pre", { class: "prompt", text: s.prompt }));
    s.attempts.forEach((a, i) => {
      parts.push(
        el("div", { class: "attempt" + (a.failure ? " failed" : "") },
          el("h4", { text: i === 0 ? "answer" : `re-ask ${i}` }),
          el("pre", { class: "raw", text: a.reply ?? "" }),
          ...(a.calls || []).map((c) => el("pre", { class: "call" + (c.error ? " failed" : ""),
            text: `${c.name || "?"}(${JSON.stringify(c.arguments ?? c.arguments_text ?? null)})` +
              (c.error ? ` -> error: ${c.error}` : ` -> ${JSON.stringify(c.result)}`) })),
          a.failure ? el("p", { class: "error", text: `could not use it: ${a.failure}` }) : null,
          a.tool_result ? el("pre", { class: "muted", text: `tool: ${a.tool_result}` }) : null),
      );
    });
    if (!s.attempts.length && !s.prompt) parts.push(el("p", { class: "muted", text: "decided without a model (no prompt)" }));
    return parts;
  }
}

// ------------------------------------------------------------------ streams, training, results

class StreamPanel {
  constructor(run) {
    this.run = run;
    this.count = run.seconds;
    this.node = el("section", { class: "panel", "data-run-id": run.id });
    this.node.append(el("h3", { text: run.id || "(this folder)" }), el("p", { class: "summary", text: summaryText(run.summary) }));
    const views = el("div", { class: "views" });
    this.views = {};
    if (run.video) {
      // no native controls: their bar would cover the burned-in subtitles; the slider and
      // the play button drive the video
      this.video = el("video", { src: fileUrl(run, run.video.file), muted: "", preload: "auto", playsinline: "" });
      this.views.video = view("video", "stream (subtitles burned in)", this.video);
    } else {
      this.views.video = view("video", "stream", el("p", { class: "muted video-error", text: run.video_error || "this run wrote no stream.mp4" }));
    }
    this.views.video.classList.add("wide");
    this.timeline = this.timelineSvg();
    this.views.timeline = view("timeline", "speaking seconds per speaker: said by the agent (blue) and true (green)", this.timeline);
    this.views.timeline.classList.add("wide");
    this.lines = el("div");
    this.views.lines = view("lines", "what was said at this second", this.lines);
    for (const v of Object.values(this.views)) views.append(v);
    this.node.append(views);
  }

  timelineSvg() {
    // per speaker: what its agent said (blue, upper row) and what it truly said (green, lower)
    const W = 640, NAME = 90, ROW = 14, GAP = 8, n = Math.max(1, this.run.seconds);
    const lanes = this.run.lanes; // one per speaker, in the server's order
    const H = Math.max(1, lanes.length) * (2 * ROW + GAP) + 4;
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "timeline" });
    const x = (t) => NAME + (t / n) * (W - NAME - 10);
    lanes.forEach((lane, i) => {
      const top = 2 + i * (2 * ROW + GAP);
      const group = svg("g", { "data-lane": lane.speaker });
      const name = svg("text", { x: 4, y: top + ROW + 4, "font-size": 11, fill: "#333" });
      name.textContent = lane.speaker;
      group.append(name);
      for (const [side, row, said, colour] of [["said", top, lane.pred, "#1f6fb2"], ["true", top + ROW, lane.label, "#2a9d4b"]]) {
        for (const second of Object.keys(said || {})) {
          const t = Number(second);
          group.append(svg("rect", { x: x(t), y: row + 1, width: Math.max(2, x(t + 1) - x(t) - 1), height: ROW - 2, fill: colour, "data-side": side }));
        }
      }
      root.append(group);
    });
    this.cursor = svg("line", { y1: 0, y2: H, stroke: "#d33", "stroke-width": 2 });
    root.append(this.cursor);
    this.x = x;
    return root;
  }

  show(k, fromVideo = false) {
    const second = Math.max(0, Math.min(k, Math.max(0, this.count - 1)));
    if (this.video && !fromVideo) this.video.currentTime = second + 0.25;
    this.cursor.setAttribute("x1", this.x(second + 0.5));
    this.cursor.setAttribute("x2", this.x(second + 0.5));
    const parts = [];
    for (const lane of this.run.lanes) {
      const at = String(second);
      const lines = el("div", { class: "lane-lines", "data-lane": lane.speaker });
      if (lane.pred) lines.append(el("p", { class: "said", text: `${lane.speaker} at ${second}s: ${lane.pred[at] ?? "(silent)"}` }));
      if (lane.label) lines.append(el("p", { class: "muted", text: `${lane.speaker}, true line: ${lane.label[at] ?? "(silence)"}` }));
      parts.push(lines);
    }
    const d = (this.run.decisions || [])[second];
    if (d) {
      const scores = Object.entries(d.scores || {}).map(([who, v]) => `${who} ${fmt(v)}`).join(", ");
      parts.push(el("p", { class: "muted decision", text: `speak scores ${scores || "-"}; decided in ${fmt(d.decide_ms)} ms` +
        `, processed in ${fmt(d.processing_ms)} ms${d.late ? " (late)" : ""}` }));
    }
    this.lines.replaceChildren(...parts);
    for (const v of Object.values(this.views)) v.dataset.step = String(second);
  }
}

function trainingPanel(run) {
  const node = el("section", { class: "panel", "data-run-id": run.id }, el("h3", { text: run.id }), el("p", { class: "summary", text: summaryText(run.summary) }));
  const views = el("div", { class: "views" });
  for (const [name, points] of Object.entries(run.curves)) views.append(view(`curve-${name}`, name, lineChart(points, { label: `${name} by ${run.x}` })));
  node.append(views);
  return node;
}

function resultsPanel(run) {
  const node = el("section", { class: "panel", "data-run-id": run.id }, el("h3", { text: run.id }), el("p", { class: "summary", text: summaryText(run.summary) }));
  if (run.images.length) node.append(el("div", { class: "images" }, ...run.images.map((name) => el("img", { src: fileUrl(run, name), alt: name }))));
  const keys = [...new Set(run.rows.flatMap((r) => Object.keys(r)))];
  const table = el("table", { class: "rows" }, el("tr", {}, ...keys.map((k) => el("th", { text: k }))));
  for (const r of run.rows) table.append(el("tr", {}, ...keys.map((k) => el("td", { text: fmt(r[k]) }))));
  node.append(table);
  return node;
}

function panelFor(run, options = {}) {
  if (run.kind === "explore") return new ExplorePanel(run, options);
  if (run.kind === "stream") return new StreamPanel(run);
  return { node: run.kind === "training" ? trainingPanel(run) : resultsPanel(run), count: 0 };
}

// ------------------------------------------------------------------ pages

function slider(panels, start) {
  const explore = panels.filter((p) => p instanceof ExplorePanel);
  const isStream = panels.length && panels.every((p) => p instanceof StreamPanel);
  // runs that count differently (decisions vs primitive steps) line up on primitive steps
  const byProgress = explore.length === panels.length && new Set(explore.map((p) => p.run.unit)).size > 1;
  const lastSteps = (p) => (p.run.steps.length ? p.run.steps[p.run.steps.length - 1].steps : 0);
  const count = byProgress ? Math.max(...explore.map(lastSteps)) : Math.max(...panels.map((p) => p.count || 0));
  if (!count) return null;
  const min = isStream ? 0 : 1, max = isStream ? count - 1 : count;
  const input = el("input", { type: "range", id: "step", min, max, value: Math.min(max, Math.max(min, start ?? min)), "aria-label": "step" });
  const label = el("span", { id: "step-label" });
  const unit = isStream ? "second" : byProgress ? "primitive step" : (panels[0].run && panels[0].run.unit) || "step";
  const update = (fromVideo = false) => {
    const k = Number(input.value);
    label.textContent = `${unit} ${k} of ${count}`;
    try {
      for (const p of panels) if (p.show) p.show(byProgress ? p.indexAt(k) : k, fromVideo);
    } catch (error) {
      showError(`cannot draw step ${k}: ${error.message}`);
    }
  };
  input.addEventListener("input", () => update());
  const move = (delta) => { input.value = Number(input.value) + delta; update(); };
  const prev = el("button", { text: "◀", "aria-label": "previous step", onclick: () => move(-1) });
  const next = el("button", { text: "▶", "aria-label": "next step", onclick: () => move(1) });
  const parts = [prev, input, next, label];
  const streamVideo = isStream && panels[0].video;
  if (streamVideo) {
    const play = el("button", { id: "play", text: "play" });
    play.addEventListener("click", () => (streamVideo.paused ? streamVideo.play() : streamVideo.pause()));
    streamVideo.addEventListener("play", () => (play.textContent = "pause"));
    streamVideo.addEventListener("pause", () => (play.textContent = "play"));
    streamVideo.addEventListener("timeupdate", () => {
      if (streamVideo.paused) return;
      input.value = Math.floor(streamVideo.currentTime);
      update(true); // follow the playing video; do not seek it back
    });
    parts.unshift(play);
  }
  document.onkeydown = (e) => {
    // the slider, buttons and videos handle their own keys; modifiers mean browser shortcuts
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    if (e.target instanceof Element && e.target.closest("input, button, video, select, textarea")) return;
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      e.preventDefault();
      move(e.key === "ArrowLeft" ? -1 : 1);
    }
  };
  return { node: el("div", { class: "controls" }, ...parts), update };
}

async function showRun(id) {
  let run;
  try {
    run = await getJSON(`/api/run?id=${encodeURIComponent(id)}`);
  } catch (error) {
    showError(`cannot show run ${id || "(this folder)"}: ${error.message}`);
    return;
  }
  const panel = panelFor(run);
  const control = slider([panel]);
  app.replaceChildren(...[control && control.node, panel.node].filter(Boolean));
  if (control) control.update();
}

async function showCompare(a, b) {
  let runs;
  try {
    runs = await Promise.all([a, b].map((id) => getJSON(`/api/run?id=${encodeURIComponent(id)}`)));
  } catch (error) {
    showError(`cannot compare ${a} and ${b}: ${error.message}`);
    return;
  }
  const refused = pairingRefused(...runs);
  if (refused) {
    showError(refused);
    return;
  }
  // one coverage scale for both, so their curves can be read against each other
  const maxSteps = Math.max(0, ...runs.map((r) => (r.steps && r.steps.length ? r.steps[r.steps.length - 1].steps : 0)));
  const panels = runs.map((r) => panelFor(r, { maxSteps }));
  const control = slider(panels);
  const settings = (r) => (r.config || {}).settings || {};
  const scenes = runs.map((r) => (r.summary || {}).scene ?? settings(r).scene ?? settings(r).source);
  const note = scenes[0] !== scenes[1]
    ? el("p", { class: "error", id: "scene-warning", text: `these runs are on different scenes (${scenes[0]} vs ${scenes[1]})` })
    : el("p", { class: "summary", text: `both on ${scenes[0]}` });
  app.replaceChildren(...[note, control && control.node, el("div", { class: "columns", id: "comparison" }, ...panels.map((p) => p.node))].filter(Boolean));
  if (control) control.update();
}

async function route() {
  document.onkeydown = null;
  const hash = location.hash || "#/";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  try {
    if (path === "/run") await showRun(params.get("id") || "");
    else if (path === "/compare") await showCompare(params.get("a") || "", params.get("b") || "");
    else await listRuns();
  } catch (error) {
    showError(error.message);
  }
}

window.addEventListener("hashchange", route);
route();
