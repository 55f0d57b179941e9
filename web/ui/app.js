// meshlab dashboard: plain JavaScript, no framework, nothing loaded from elsewhere.
// Every view reads the lab's JSON API (docs/API.md); live data arrives over server-sent
// events: /v1/events (the lab's event bus) and /v1/topology/stream (one snapshot a second).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MAX_EVENTS = 2000;

// h builds an element: h("td", {class: "num"}, "42"). Text is always text, never HTML.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (v !== undefined && v !== null) el.setAttribute(k, v);
  }
  for (const c of children.flat()) el.append(c instanceof Node ? c : String(c ?? ""));
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : String(c));
  return el;
}

const $ = (id) => document.getElementById(id);

async function api(method, path, body, contentType) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.body = typeof body === "string" ? body : JSON.stringify(body);
    opts.headers["Content-Type"] = contentType || "application/json";
  }
  const resp = await fetch(path, opts);
  const text = await resp.text();
  let data = text;
  try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
  return { status: resp.status, ok: resp.ok, data };
}

// ---- state shared by the views ----
const state = { view: "topology", pod: "", topology: null, pods: [], events: [], kinds: new Set(), levels: {}, levelEdges: {}, edgeHist: {}, dead: false, openChanges: new Set() };

// ---- navigation ----
function route() {
  const [view, arg] = (location.hash.slice(1) || "topology").split("/");
  state.view = ["topology", "pods", "traffic", "config", "events"].includes(view) ? view : "topology";
  for (const sec of document.querySelectorAll(".view")) sec.classList.toggle("active", sec.id === "view-" + state.view);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === state.view);
  if (state.view === "topology") { startTopology(); loadGuide(); } else stopTopology();
  if (state.view === "pods") {
    if (arg) state.pod = decodeURIComponent(arg);
    showPod();
  } else stopPod();
  if (state.view === "config") loadConfig();
}

// ---- pods list (selects) ----
// podKey is the string that names a pod to the API: "<name>" in namespace default,
// "<name>.<namespace>" elsewhere (pod names may repeat across namespaces).
function podKey(p) { return p.key || p.name; }

async function loadPods() {
  const r = await api("GET", "/v1/pods");
  if (!r.ok) return;
  state.pods = r.data || [];
  for (const sel of [$("pod-select"), $("traffic-pod")]) {
    const cur = sel.value;
    sel.replaceChildren(...state.pods.map((p) => h("option", { value: podKey(p) }, podKey(p))));
    if (cur) sel.value = cur;
  }
  if (!state.pod && state.pods.length) state.pod = podKey(state.pods[0]);
  $("pod-select").value = state.pod;
}

// ---- topology ----
let topoSource = null;
function startTopology() {
  if (topoSource || state.dead) return;
  topoSource = new EventSource("/v1/topology/stream");
  topoSource.onmessage = (m) => { state.topology = JSON.parse(m.data); observeEdges(state.topology); drawTopology(state.topology); };
  topoSource.onerror = () => checkAlive();
}
function stopTopology() { if (topoSource) { topoSource.close(); topoSource = null; } }

// levels places a service one column right of every service whose pods call it (as far
// as the traffic seen so far tells), so callers sit left of callees and stay there. A
// call that would close a cycle (a callee calling back) is left out of the layout: the
// first calls seen keep their order.
function levels(t, podService) {
  const calls = state.levelEdges; // service -> Set of services it calls, cycle-free
  const reaches = (a, b, seen = new Set()) => a === b || (!seen.has(a) && (seen.add(a), [...(calls[a] || [])].some((n) => reaches(n, b, seen))));
  const gateways = new Set(t.services.filter((svc) => svc.gateway).map((svc) => svc.hostname));
  for (const e of t.edges) {
    const from = podService[e.from];
    if (!from || from === e.to || (calls[from] && calls[from].has(e.to))) continue;
    if (gateways.has(e.to) && e.from !== HOST_NODE) continue; // a gateway stays at the entry, left

    if (!reaches(e.to, from)) (calls[from] = calls[from] || new Set()).add(e.to);
  }
  const lv = {};
  const ids = [...(HOST_NODE in podService ? [HOST_NODE] : []), ...t.services.map((svc) => svc.hostname), ...("(no service)" in state.levels ? ["(no service)"] : [])];
  for (const id of ids) lv[id] = 0;
  for (let i = 0; i < ids.length; i++) {
    let changed = false;
    for (const [from, tos] of Object.entries(calls)) {
      if (!(from in lv)) continue;
      for (const to of tos) if (to in lv && lv[to] < lv[from] + 1) { lv[to] = lv[from] + 1; changed = true; }
    }
    if (!changed) break;
  }
  return lv;
}

// ZTUNNEL_BOX is the id of the ztunnel's box; ZTUNNEL_METRIC the Metric of the edges
// ztunnel counted (an ambient pod's connections, api.EdgeMetricZtunnel).
const ZTUNNEL_BOX = "(ztunnel)", ZTUNNEL_METRIC = "istio_tcp_connections_opened_total";

// HOST_NODE is the From of edges that entered the mesh from the host through a gateway
// (web.HostNode): `meshlab port-forward` traffic, drawn as a box of its own left of the
// gateways.
const HOST_NODE = "host (port-forward)";

// Edge health: the 5xx share of the requests an edge carried decides its colour, its
// requests per second its thickness. The thresholds are the legend's.
const HEALTH = { warn: 0.01, bad: 0.2 }; // 5xx share: >= 1 % amber, >= 20 % red
const EDGE_WINDOW_MS = 10000;

// observeEdges keeps each edge's counters over the last EDGE_WINDOW_MS of snapshots, so
// a burst stays visible (and measured) for a few seconds instead of one poll.
function observeEdges(t) {
  const now = Date.parse(t.time) || Date.now();
  const seen = new Set();
  for (const e of t.edges) {
    const k = e.from + "|" + e.to;
    seen.add(k);
    let hist = state.edgeHist[k] || [];
    const last = hist[hist.length - 1];
    if (last && (e.requests < last.req || e.errors < last.err)) hist = []; // counters restarted
    hist.push({ t: now, req: e.requests, err: e.errors });
    while (hist.length > 2 && now - hist[1].t >= EDGE_WINDOW_MS) hist.shift();
    state.edgeHist[k] = hist;
  }
  for (const k of Object.keys(state.edgeHist)) if (!seen.has(k)) delete state.edgeHist[k];
}

// edgeHealth measures an edge: rps and 5xx share over the window when it carried
// requests in it, else (idle) the share over every request the sidecar counted.
function edgeHealth(e) {
  const hist = state.edgeHist[e.from + "|" + e.to] || [];
  let rps = e.rps || 0, rate = e.rps > 0 ? e.errorRate : null, windowS = 0;
  if (hist.length >= 2) {
    const a = hist[0], b = hist[hist.length - 1];
    windowS = (b.t - a.t) / 1000;
    const dreq = b.req - a.req;
    rps = windowS > 0 ? dreq / windowS : 0;
    rate = dreq > 0 ? (b.err - a.err) / dreq : null;
  }
  const idle = rate === null;
  if (idle) rate = e.requests > 0 ? e.errors / e.requests : 0;
  let level = rate >= HEALTH.bad ? "bad" : rate >= HEALTH.warn ? "warn" : "ok";
  if (e.requests === 0 && (e.denied || 0) === 0) level = "none";
  return { rps, rate, idle, level, windowS };
}

// edgeWidth grows with the request rate, logarithmically, from 1.5 to 7 px.
const edgeWidth = (rps) => 1.5 + Math.min(5.5, 1.3 * Math.log2(1 + rps));


// bezier returns the point at t of a cubic curve p0..p3.
function bezier(p, t) {
  const u = 1 - t;
  const f = (k) => u * u * u * p[0][k] + 3 * u * u * t * p[1][k] + 3 * u * t * t * p[2][k] + t * t * t * p[3][k];
  return { x: f(0), y: f(1) };
}

// textWidth measures a label as the page draws it (11px, the body's font) on a canvas,
// which needs no layout: measuring the SVG text itself would force one per draw.
let measureCtx = null, measureFont = "";
function textWidth(text, bold) {
  if (!measureCtx) {
    measureCtx = document.createElement("canvas").getContext("2d");
    measureFont = "11px " + getComputedStyle(document.body).fontFamily;
  }
  const font = (bold ? "bold " : "") + measureFont;
  if (measureCtx.font !== font) measureCtx.font = font;
  return measureCtx.measureText(text).width;
}

function drawTopology(t) {
  const dead = state.dead;
  const podService = {}, podInfo = {};
  for (const p of t.pods) podInfo[podKey(p)] = p;
  for (const svc of t.services) for (const p of svc.pods) if (!(p in podService)) podService[p] = svc.hostname;
  const boxes = t.services.map((svc) => ({ id: svc.hostname, title: svc.name + "." + svc.namespace, sub: svc.vip + " :" + (svc.ports || []).join(","), pods: svc.pods, gateway: !!svc.gateway }));
  if (t.edges.some((e) => e.from === HOST_NODE)) { // traffic from the host: its own box, first
    boxes.unshift({ id: HOST_NODE, title: "host", sub: "meshlab port-forward (127.0.0.1)", pods: [HOST_NODE], host: true });
    podService[HOST_NODE] = HOST_NODE;
  }
  // The node's ztunnel (an ambient lab's) gets a box of its own, first: it carries every
  // ambient pod's traffic, drawn as the HBONE edges between those pods.
  const zt = t.pods.find((p) => p.ztunnel);
  if (zt) {
    boxes.unshift({ id: ZTUNNEL_BOX, title: zt.name + " · " + zt.namespace, sub: "ztunnel: the node proxy (HBONE :15008)", pods: [podKey(zt)], ztunnel: true });
    podService[podKey(zt)] = ZTUNNEL_BOX;
  }
  const lone = t.pods.filter((p) => !(podKey(p) in podService)).map(podKey);
  if (lone.length) {
    boxes.push({ id: "(no service)", title: "pods of no service", sub: "", pods: lone });
    for (const p of lone) podService[p] = "(no service)";
    if (!("(no service)" in state.levels)) state.levels["(no service)"] = 0; // callers of no service sit left too
  }
  const lv = levels(t, podService);
  // Layout: columns by level, boxes stacked; pods as dots, named when there are few.
  // Columns leave room between boxes for the edges and their labels.
  const colW = 440, boxW = 200, perRow = 10, gap = 28, cols = {};
  const pos = {}, podPos = {};
  for (const b of boxes) {
    const col = lv[b.id] || 0;
    const named = b.pods.length <= 8;
    const bh = 44 + (named ? b.pods.length * 16 : Math.ceil(b.pods.length / perRow) * 18);
    const y = cols[col] || 10;
    cols[col] = y + bh + gap;
    pos[b.id] = { x: 10 + col * colW, y, w: boxW, h: bh, named };
    b.xy = b.pods.map((p, i) => {
      const px = named ? pos[b.id].x + 14 : pos[b.id].x + 14 + (i % perRow) * 18;
      const py = named ? y + 48 + i * 16 : y + 48 + Math.floor(i / perRow) * 18;
      if (b.id === podService[p]) podPos[p] = { x: px, y: py }; // edges start at the pod's first service
      return { x: px, y: py };
    });
  }
  const width = Math.max(600, (Math.max(0, ...Object.keys(cols).map(Number)) + 1) * colW + 40);
  const height = Math.max(160, ...Object.values(cols)) + 10;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, preserveAspectRatio: "xMinYMin meet", role: "img", "aria-label": "mesh topology", class: dead ? "dead" : "" });
  // One arrowhead per colour, sized in user space so thick edges keep small heads.
  const defs = s("defs", {});
  for (const lvl of ["ok", "warn", "bad", "none", "dead"]) {
    defs.append(s("marker", { id: "arrow-" + lvl, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 13, markerHeight: 13, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
      s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow " + lvl })));
  }
  svg.append(defs);
  const obstacles = []; // what labels must not cover: boxes (with their pod names) and other labels
  for (const b of boxes) {
    const p = pos[b.id];
    obstacles.push({ x: p.x - 4, y: p.y - 4, w: p.w + 8, h: p.h + 8 });
    const g = s("g", { class: "svc" + (b.gateway ? " gateway" : "") + (b.host ? " host" : "") + (b.ztunnel ? " ztunnel" : ""), "data-service": b.id });
    g.append(s("rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: b.gateway ? 2 : 8 }));
    g.append(s("text", { x: p.x + 8, y: p.y + 17, class: "title" }, b.title));
    g.append(s("text", { x: p.x + 8, y: p.y + 32 }, b.sub));
    if (b.gateway || b.host || b.ztunnel) { // a tab on the box's top border, right: what the box is
      const tag = b.gateway ? "gateway" : b.ztunnel ? "ztunnel" : "outside the mesh", tw = textWidth(tag, true) + 8;
      g.append(s("rect", { x: p.x + p.w - tw - 8, y: p.y - 7, width: tw, height: 13, rx: 3, class: "tag" }));
      g.append(s("text", { x: p.x + p.w - tw - 4, y: p.y + 3, class: "tag" }, tag));
    }
    if (b.host) {
      const pp = b.xy[0];
      g.append(s("rect", { x: pp.x - 6, y: pp.y - 6, width: 12, height: 12, class: "host-node", "data-pod": HOST_NODE },
        s("title", {}, "the host: connections through meshlab port-forward, counted at the gateway")));
      g.append(s("text", { x: pp.x + 10, y: pp.y + 4, class: "pod-name" }, HOST_NODE));
      svg.append(g);
      continue;
    }
    for (const [i, name] of b.pods.entries()) {
      const pp = b.xy[i], info = podInfo[name] || {};
      const health = dead ? "unknown" : info.ready ? "ready" : "unready";
      const mode = info.dataplaneMode || "";
      const cls = "pod " + health + (info.rbacDenied > 0 ? " denying" : "") + (info.gateway ? " gateway" : "") + (mode === "ambient" ? " ambient" : "") + (info.ztunnel ? " ztunnel" : "");
      const attrs = { class: cls, "data-pod": name, "data-mode": info.ztunnel ? "ztunnel" : mode };
      const c = info.gateway // a gateway pod is a diamond, the ztunnel a square
        ? s("path", { d: `M ${pp.x} ${pp.y - 8} L ${pp.x + 8} ${pp.y} L ${pp.x} ${pp.y + 8} L ${pp.x - 8} ${pp.y} Z`, ...attrs })
        : info.ztunnel ? s("rect", { x: pp.x - 6, y: pp.y - 6, width: 12, height: 12, ...attrs })
          : s("circle", { cx: pp.x, cy: pp.y, r: 6, ...attrs });
      const what = info.ztunnel ? " · ztunnel, the node proxy of the ambient pods" : mode === "ambient" ? " · ambient: no sidecar, its traffic goes through ztunnel" : ` epoch ${info.epoch}`;
      c.append(s("title", {}, dead ? `${name}: unknown, the lab is down` : `${name} ${info.ip || ""}${what}` + (info.rbacDenied > 0 ? ` · ${info.rbacDenied} denied by RBAC` : "")));
      c.addEventListener("click", () => { location.hash = "#pods/" + encodeURIComponent(name); });
      g.append(c);
      if (p.named) { // a name too long for the box is cut, whole in its tooltip
        let shown = name;
        while (shown.length > 4 && textWidth(shown, false) > p.w - 26) shown = shown.slice(0, -1);
        const txt = s("text", { x: pp.x + 10, y: pp.y + 4, class: "pod-name" }, shown === name ? name : shown.slice(0, -1) + "…");
        if (shown !== name) txt.append(s("title", {}, name));
        g.append(txt);
      }
    }
    svg.append(g);
  }
  // Edges leave the source box at its right side, level with the calling pod (so the line
  // never crosses a pod's name), and arrive spread along the target box's left side.
  // A pod calling its own service is written under the box (a loop would cross the
  // edges leaving it): "↻ pod: 2.0 rps · 0% 5xx", coloured as an edge.
  const selfCalls = {};
  for (const e of t.edges) {
    if (!podPos[e.from] || podService[e.from] !== e.to) continue;
    const box = pos[e.to], hl = edgeHealth(e), level = dead ? "dead" : hl.level, k = (selfCalls[e.to] = (selfCalls[e.to] || 0) + 1) - 1;
    const y = box.y + box.h + 12 + k * 13;
    const label = `↻ ${e.from} · ` + (dead ? "no data" : `${(hl.rate * 100).toFixed(0)}% 5xx` + (hl.idle ? "" : ` · ${hl.rps.toFixed(1)} rps`));
    const txt = s("text", { x: box.x + 8, y, class: "edge-label self-call " + level, "data-from": e.from, "data-to": e.to, "data-level": level }, label);
    txt.append(s("title", {}, `${e.from} calls its own service. ` + edgeTitle(e, hl)));
    svg.append(txt);
    obstacles.push({ x: box.x, y: y - 11, w: textWidth(label, false) + 8, h: 14 });
  }
  const drawn = t.edges.filter((e) => podPos[e.from] && pos[e.to] && podService[e.from] !== e.to);
  const incoming = {};
  for (const e of drawn) (incoming[e.to] = incoming[e.to] || []).push(e);
  for (const list of Object.values(incoming)) list.sort((a, b) => podPos[a.from].y - podPos[b.from].y);
  const edgeLayer = s("g", { class: "edges" }), labelLayer = s("g", { class: "edge-labels" });
  for (const e of drawn) {
    const src = pos[podService[e.from]], to = pos[e.to], from = podPos[e.from];
    const ins = incoming[e.to], k = ins.indexOf(e);
    const y2 = to.y + 14 + ((k + 1) * Math.max(8, to.h - 22)) / (ins.length + 1);
    let pts;
    if (to.x > src.x + src.w) { // callee to the right: the usual case
      const x1 = src.x + src.w, x2 = to.x - 1, mx = (x1 + x2) / 2;
      pts = [[x1, from.y], [mx, from.y], [mx, y2], [x2, y2]];
    } else if (to.x + to.w < src.x) { // callee to the left (a call back): leave by the left side
      const x1 = src.x, x2 = to.x + to.w + 1, mx = (x1 + x2) / 2;
      pts = [[x1, from.y], [mx, from.y], [mx, y2], [x2, y2]];
    } else { // same column: loop out to the right
      const x1 = src.x + src.w, x2 = to.x + to.w + 1, bulge = Math.max(x1, x2) + 70;
      pts = [[x1, from.y], [bulge, from.y], [bulge, y2], [x2, y2]];
    }
    const hl = edgeHealth(e);
    const level = dead ? "dead" : hl.level;
    const cls = "edge " + level + (hl.idle ? " idle" : " busy") + (e.mtls ? " mtls" : " plain") + (e.denied > 0 ? " denied" : "") + (e.hbone ? " hbone" : "");
    const d = `M ${pts[0][0]} ${pts[0][1]} C ${pts[1][0]} ${pts[1][1]}, ${pts[2][0]} ${pts[2][1]}, ${pts[3][0]} ${pts[3][1]}`;
    const path = s("path", { d, class: cls, "marker-end": `url(#arrow-${level})`, "data-from": e.from, "data-to": e.to,
      "data-level": level, "data-error-rate": hl.rate.toFixed(3), "data-rps": hl.rps.toFixed(2) });
    path.style.strokeWidth = (hl.idle || dead ? 1.5 : edgeWidth(hl.rps)) + "px";
    path.append(s("title", {}, edgeTitle(e, hl)));
    edgeLayer.append(path);
    const rate = `${(hl.rate * 100).toFixed(0)}% 5xx`;
    const label = dead ? "lab down: no data" : e.metric === ZTUNNEL_METRIC // ztunnel counts connections (L4), not requests
      ? (hl.idle ? `0 conn/s · ${e.requests} conns` : `${hl.rps.toFixed(1)} conn/s`) + (e.errors > 0 ? ` · ${e.errors} failed` : "") + ` · ${e.hbone ? "HBONE mTLS" : "plaintext"}`
      : (hl.idle ? `0 rps · ${rate} of ${e.requests}` : `${hl.rps.toFixed(1)} rps · ${rate}`) +
        ` · ${e.mtls ? "mTLS" : "plaintext"}${e.denied > 0 ? ` · ${e.denied} denied` : ""}`;
    const lw = textWidth(label, level === "bad" || e.denied > 0) + 8, lh = 15;
    // Candidate spots along the curve, away from both ends (the arrowhead and the source
    // box): the middle first, then either side, above the line and then below it.
    // Edges fan out towards their targets, so spots past the middle tell them apart best;
    // a label never reaches into the last 18 px before the arrowhead.
    // A loop (out to the right and back) keeps its label beyond the loop's far side.
    const loop = pts[1][0] > Math.max(pts[0][0], pts[3][0]);
    const lo = loop ? pts[1][0] - 10 : Math.min(pts[0][0], pts[3][0]) + 4;
    const hi = loop ? lo + lw + 18 : Math.max(pts[0][0], pts[3][0]) - 18;
    const top = Math.min(pts[0][1], pts[3][1]) - 3 * lh - 8, bottom = Math.max(pts[0][1], pts[3][1]) + 3 * lh + 8;
    const right = Math.max(hi, lo + lw);
    const near = obstacles.filter((o) => o.x < right && o.x + o.w > lo && o.y < bottom && o.y + o.h > top);
    // The first spot free of everything wins; when none is, the one covering least.
    const overlap = (a, b) => Math.max(0, Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x)) * Math.max(0, Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y));
    let spot = null, best = null, bestCost = Infinity;
    for (const tt of [0.62, 0.5, 0.74, 0.4, 0.3]) {
      const c = bezier(pts, tt);
      const x = Math.max(lo, Math.min(hi - lw, c.x - lw / 2));
      for (const dy of [-lh - 3, 5, -2 * lh - 4, lh + 6, -3 * lh - 5, 2 * lh + 7]) {
        const r = { x, y: c.y + dy, w: lw, h: lh };
        const cost = near.reduce((n, o) => n + overlap(o, r), 0);
        if (cost === 0) { spot = r; break; }
        if (cost < bestCost) { best = r; bestCost = cost; }
      }
      if (spot) break;
    }
    spot = spot || best;
    obstacles.push(spot);
    const lg = s("g", { class: "edge-label-box " + level, "data-from": e.from, "data-to": e.to });
    lg.append(s("rect", { x: spot.x, y: spot.y, width: spot.w, height: spot.h, rx: 3 }));
    lg.append(s("text", { x: spot.x + 4, y: spot.y + 11, class: "edge-label " + level + (e.denied > 0 ? " denied" : "") }, label));
    labelLayer.append(lg);
  }
  svg.append(edgeLayer, labelLayer);
  $("topo-graph").replaceChildren(svg);
  const svcsOf = {};
  for (const svc of t.services) for (const p of svc.pods) (svcsOf[p] = svcsOf[p] || []).push(svc.name);
  $("topo-pods").tBodies[0].replaceChildren(...t.pods.map((p) => h("tr", { "data-mode": p.ztunnel ? "ztunnel" : p.dataplaneMode || "" },
    h("td", {}, h("a", { href: "#pods/" + encodeURIComponent(podKey(p)) }, p.name)), h("td", {}, p.namespace), h("td", {}, p.ip),
    h("td", { class: "mode" }, p.ztunnel ? "ztunnel" : p.dataplaneMode || "-"),
    dead ? h("td", { class: "unknown" }, "unknown (lab down)") : h("td", { class: p.ready ? "ok" : "bad" }, p.ready ? "ready" : "not ready"),
    h("td", { class: "num" }, p.epoch < 0 || dead ? "-" : p.epoch),
    h("td", { class: "num" + (p.rbacDenied > 0 ? " bad" : "") }, p.rbacDenied || 0),
    h("td", {}, (svcsOf[podKey(p)] || []).join(", ")))));
}

// edgeTitle explains how an edge's health, mTLS and denials were measured.
function edgeTitle(e, hl) {
  if (e.metric === ZTUNNEL_METRIC) {
    const now = hl.idle ? "no new connection in the last few seconds" : `${hl.rps.toFixed(1)} connections/s over the last ${Math.round(hl.windowS) || 1} s`;
    return `${e.from} → ${e.to}: ${now}; ${e.requests} connections, ${e.errors} failed, counted by ztunnel (istio_tcp_connections_opened_total{reporter="source"}, _failed_total); ` +
      (e.hbone ? "HBONE: mutual TLS from the caller's ztunnel to the destination pod's 15008 (connection_security_policy=\"mutual_tls\")" : "plaintext: the destination does not speak HBONE");
  }
  const tls = e.mtls ? `mTLS: ${e.handshakes || 0} TLS handshakes, ${e.mtlsEndpoints || 0} endpoints matched tlsMode-istio`
    : `plaintext: no TLS handshake${e.plaintextEndpoints ? `, ${e.plaintextEndpoints} endpoints matched the raw (tlsMode-disabled) socket` : ""}`;
  const now = hl.idle ? "no request in the last few seconds" : `${hl.rps.toFixed(1)} requests/s and ${(hl.rate * 100).toFixed(1)}% 5xx over the last ${Math.round(hl.windowS) || 1} s`;
  const counted = e.metric === "istio_requests_total" ? "istio_requests_total{reporter=\"source\"}, 5xx by response_code"
    : e.metric === "downstream_rq_total" ? "the gateway's downstream_rq_total less what the mesh's sidecars sent it"
      : "the outbound clusters' upstream_rq_total and upstream_rq_5xx";
  if (e.from === HOST_NODE) return `${e.from} → ${e.to}: ${now}; since the gateway started ${e.requests} requests, ${e.errors} 5xx; counted from ${counted}`;
  return `${e.from} → ${e.to}: ${now}; since the sidecar started ${e.requests} requests, ${e.errors} 5xx, ${e.denied || 0} denied (403); counted from ${counted}; ${tls}`;
}

// ---- pod page ----
let podTimer = null;
let certTimer = null;
function stopPod() { clearInterval(podTimer); podTimer = null; clearInterval(certTimer); certTimer = null; }
function showPod() {
  stopPod();
  if (!state.pod) return;
  $("pod-select").value = state.pod;
  state.certJSON = null;
  state.histKey = null;
  $("pod-diff").replaceChildren();
  if ($("trace-result").dataset.pod !== state.pod) { $("trace-result").replaceChildren(); $("trace-msg").textContent = ""; }
  $("hist-msg").textContent = "";
  delete $("hist-from").dataset.picked;
  delete $("hist-to").dataset.picked;
  traceDefault(state.pod);
  loadPod();
  podTimer = setInterval(loadPod, 2000);
  certTimer = setInterval(tickCert, 1000);
}

// xdsState names a type's state as proxy-status does (web.TypeStatus.State).
function xdsState(x) {
  if (!x.sent) return "NOT SENT";
  if (x.sent === x.acked) return "ACK";
  if (x.nackError) return "NACK";
  return "STALE";
}

async function loadPod() {
  const pod = state.pod;
  const r = await api("GET", "/v1/pods/" + encodeURIComponent(pod) + "/inspect?lines=40");
  if (pod !== state.pod) return;
  if (!r.ok) { $("pod-agent").textContent = "error: " + (r.data.error || r.data); return; }
  const pi = r.data;
  drawEpochs(pi);
  const states = pi.xds.map(xdsState);
  const overall = states.includes("NACK") ? "NACK" : states.includes("STALE") ? "STALE" : states.length ? "SYNCED" : "";
  $("pod-xds-state").textContent = overall;
  $("pod-xds-state").className = "badge " + (overall === "SYNCED" ? "ok" : overall ? "bad" : "");
  $("pod-xds").tBodies[0].replaceChildren(...pi.xds.map((x, i) => h("tr", {},
    h("td", { class: "mono" }, x.typeUrl.replace("type.googleapis.com/", "")), h("td", {}, x.sent), h("td", {}, x.acked), h("td", { class: "mono" }, x.nonce),
    h("td", { class: states[i] === "ACK" ? "ok" : "bad" }, states[i]),
    h("td", { class: "error" }, x.nackError ? `${x.nackError} (${new Date(x.lastNack).toLocaleTimeString()})` : ""))));
  if (!pi.xds.length) $("pod-xds").tBodies[0].replaceChildren(h("tr", {}, h("td", { colspan: 6 }, pi.xdsConnected ? "connected, nothing requested" : "no xDS stream")));
  drawCapture(pi.capture);
  $("pod-capture-error").textContent = pi.captureError || "";
  for (const name of ["proxy", "app", "agent"]) $("log-" + name).textContent = (pi.logs[name] || []).join("\n");
  // The certificate comes from the pod detail (GET /v1/pods/:pod: proxy.cert).
  const [d, f, hi] = await Promise.all([api("GET", "/v1/pods/" + encodeURIComponent(pod)), api("GET", "/v1/faults"),
    api("GET", "/v1/pods/" + encodeURIComponent(pod) + "/history")]);
  if (pod !== state.pod) return;
  if (d.ok && d.data && typeof d.data === "object") drawCert(d.data.proxy ? d.data.proxy.cert : null, d.data.proxy ? "" : "no sidecar, or its agent did not answer");
  drawFaults(f.ok && Array.isArray(f.data) ? f.data : null, f.status);
  drawHistory(hi.ok ? hi.data : null, hi.ok ? "" : hi.status === 404 ? "no config history for this pod" : "error: " + (hi.data.error || hi.data));
  loadIstioMetrics(); // istio.js
}

// ---- certificate panel ----
const fmtTime = (t) => (t ? new Date(t).toLocaleString() : "-");
function fmtDur(ms) {
  let s = Math.max(0, Math.round(ms / 1000));
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return (d ? d + "d " : "") + (d || hh ? hh + "h " : "") + (d || hh || m ? m + "m " : "") + s + "s";
}

function drawCert(c, why) {
  const text = JSON.stringify(c || null);
  if (text === state.certJSON) return;
  state.certJSON = text;
  state.cert = c;
  if (!c) { $("pod-cert").textContent = "no certificate: " + (why || "the agent has no certificate manager (a lab without a CA)"); return; }
  const tr = c.trust || {};
  const roots = (tr.trustBundle || []).map((r) => `${r.serial} ${r.subject}${r.signing ? " (signing)" : ""} until ${fmtTime(r.notAfter)}`);
  const rows = [
    ["SPIFFE ID", h("span", { id: "pod-cert-spiffe", class: "mono" }, c.spiffeID)],
    ["serial", h("span", { class: "mono" }, c.serial || "-")],
    ["issuer", (tr.issuer || "-") + (tr.issuerKeyID ? " (key " + tr.issuerKeyID + ")" : "")],
    ["trusted roots", roots.length ? h("div", {}, roots.map((r) => h("div", { class: "mono" }, r))) : "-"],
    ["not before", fmtTime(c.notBefore)],
    ["not after", fmtTime(c.notAfter)],
    ["rotation", h("span", { id: "pod-cert-rotate" })],
    ["rotations", c.rotations],
  ];
  if (tr.intermediates && tr.intermediates.length) rows.push(["chain", tr.intermediates.map((r) => r.serial + " " + r.subject).join(", ")]);
  if (tr.paused) rows.push(["renewal", h("span", { class: "bad" }, "paused")]);
  if (c.error) rows.push(["last error", h("span", { class: "error" }, c.error)]);
  $("pod-cert").replaceChildren(h("table", { class: "grid kv", id: "pod-cert-table" }, h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v))))));
  tickCert();
}

// tickCert counts down to the rotation every second; past not-after the certificate
// shows as expired, in red, with the reason.
function tickCert() {
  const c = state.cert, el = $("pod-cert-rotate");
  if (!c || !el) return;
  const now = Date.now(), notAfter = Date.parse(c.notAfter), rotateAt = Date.parse(c.rotateAt);
  if (notAfter && now >= notAfter) {
    const reason = c.error || ((c.trust || {}).paused ? "renewal is paused" : "it was not renewed in time");
    el.className = "error expired";
    el.textContent = `EXPIRED ${fmtDur(now - notAfter)} ago: ${reason}`;
    return;
  }
  el.className = "";
  const left = notAfter ? ` · expires in ${fmtDur(notAfter - now)}` : "";
  if (!rotateAt) el.textContent = "no rotation scheduled" + left;
  else if (rotateAt > now) el.textContent = `rotates in ${fmtDur(rotateAt - now)} (${fmtTime(c.rotateAt)})` + left;
  else el.textContent = `rotation due ${fmtDur(now - rotateAt)} ago` + left;
}

// ---- faults of the pod ----
function podFaults(all) { return (all || []).filter((f) => (f.pods || []).includes(state.pod)); }

function drawFaults(all, status) {
  if (!all) {
    $("pod-faults").tBodies[0].replaceChildren(h("tr", {}, h("td", { colspan: 6 }, status === 404 ? "this lab has no faults route" : "faults unavailable")));
    return;
  }
  const mine = podFaults(all);
  $("pod-faults").tBodies[0].replaceChildren(...mine.map((f) => h("tr", { "data-fault": f.kind },
    h("td", { class: "mono" }, f.id), h("td", {}, f.kind + (f.delay ? " " + f.delay / 1e6 + " ms" : "")), h("td", {}, (f.pods || []).join(", ")),
    h("td", {}, new Date(f.started).toLocaleTimeString()), h("td", {}, f.message || ""),
    h("td", {}, h("button", { type: "button", on: { click: () => clearFault(f.id) } }, "Clear")))));
  if (!mine.length) $("pod-faults").tBodies[0].replaceChildren(h("tr", {}, h("td", { colspan: 6, class: "msg" }, "no fault on this pod")));
}

async function addFault() {
  const kind = $("pod-fault-kind").value;
  const spec = { kind, pods: [state.pod] };
  if (kind === "delay-push") spec.delay = Math.round(Number($("pod-fault-delay").value) * 1e6); // a Go duration: nanoseconds
  $("pod-fault-msg").textContent = "adding…";
  const r = await api("POST", "/v1/faults", spec);
  $("pod-fault-msg").textContent = r.ok ? `fault ${r.data.id} added` + (r.data.message ? ": " + r.data.message : "") : "error: " + (r.data.error || r.data);
  loadPod();
}

async function clearFault(id) {
  const r = await api("DELETE", "/v1/faults/" + encodeURIComponent(id));
  $("pod-fault-msg").textContent = r.ok ? `fault ${id} cleared` : "error: " + (r.data.error || r.data);
  loadPod();
}

async function clearPodFaults() {
  const f = await api("GET", "/v1/faults");
  const mine = f.ok ? podFaults(f.data) : [];
  if (!mine.length) { $("pod-fault-msg").textContent = "no fault on this pod"; return; }
  for (const x of mine) await api("DELETE", "/v1/faults/" + encodeURIComponent(x.id));
  $("pod-fault-msg").textContent = "cleared " + mine.map((x) => x.id).join(", ");
  loadPod();
}

// ---- xDS history and diff ----
function drawHistory(hist, err) {
  const snaps = (hist && hist.snapshots) || [];
  const key = err + "|" + snaps.map((x) => x.version + Object.values(x.types || {}).map((t) => t.state).join()).join(",");
  if (key === state.histKey) return;
  state.histKey = key;
  $("hist-msg").textContent = err;
  const typeText = (ts) => Object.entries(ts || {}).sort().map(([k, v]) => `${k} ${v.resources}${v.state ? " " + v.state : ""}`).join(" · ");
  $("pod-history").tBodies[0].replaceChildren(...snaps.slice().reverse().map((x) => h("tr", {},
    h("td", { class: "mono" }, x.version), h("td", {}, new Date(x.time).toLocaleTimeString()), h("td", {}, x.trigger),
    h("td", { class: Object.values(x.types || {}).some((t) => t.state === "NACK") ? "bad" : "" }, typeText(x.types)))));
  for (const [id, def] of [["hist-from", snaps.length - 2], ["hist-to", snaps.length - 1]]) {
    const sel = $(id), cur = sel.value;
    sel.replaceChildren(...snaps.map((x) => h("option", { value: x.version }, x.version + " · " + x.trigger)));
    if (sel.dataset.picked && snaps.some((x) => x.version === cur)) sel.value = cur; // the user's choice stays
    else if (def >= 0) sel.value = snaps[def].version;
  }
}

async function showDiff() {
  const from = $("hist-from").value, to = $("hist-to").value;
  if (!from || !to) { $("hist-msg").textContent = "pick two versions"; return; }
  const r = await api("GET", "/v1/pods/" + encodeURIComponent(state.pod) + "/diff?" + new URLSearchParams({ from, to }));
  if (!r.ok) { $("hist-msg").textContent = "error: " + (r.data.error || r.data); return; }
  $("hist-msg").textContent = "";
  const types = r.data.types || [];
  const parts = [h("p", {}, `${from} → ${to}: ` + (types.length ? types.map((t) => t.type).join(", ") + " differ" : "no difference"))];
  for (const t of types) {
    parts.push(h("h3", {}, t.type));
    const ul = h("ul", {});
    for (const n of t.added || []) ul.append(h("li", { class: "add mono" }, "+ " + n));
    for (const n of t.removed || []) ul.append(h("li", { class: "del mono" }, "- " + n));
    for (const c of t.changed || []) {
      ul.append(h("li", { class: "mono" }, "~ " + c.name, h("ul", {}, (c.fields || []).map((f) => h("li", {}, f.path + ": ",
        h("span", { class: "del" }, f.old === undefined ? "(none)" : f.old), " → ", h("span", { class: "add" }, f.new === undefined ? "(none)" : f.new))))));
    }
    parts.push(ul);
  }
  $("pod-diff").replaceChildren(h("div", { class: "diff", id: "pod-diff-result" }, parts));
}

function drawEpochs(pi) {
  const a = pi.agent;
  if (!a) {
    $("pod-agent").textContent = pi.agentError ? "agent: " + pi.agentError : "no sidecar";
    $("pod-epochs").replaceChildren();
    return;
  }
  $("pod-agent").textContent = `${a.dataPlane} ${a.proxyVersion || ""} · ${a.ready ? "ready" : "not ready"} · restarts ${a.restarts}` + (a.message ? " · " + a.message : "");
  $("pod-epochs").replaceChildren(...(a.epochs || []).map((e) => h("div", { class: "epoch " + e.state, "data-epoch": e.epoch },
    h("div", {}, "epoch ", h("b", {}, e.epoch), " · pid ", e.pid),
    h("div", { class: "state" }, e.state),
    h("div", { class: "msg" }, "started " + new Date(e.startedAt).toLocaleTimeString() + (e.reason ? " (" + e.reason + ")" : "")),
    e.exitedAt ? h("div", { class: "msg" }, "exited " + new Date(e.exitedAt).toLocaleTimeString() + (e.exitCode !== undefined ? " code " + e.exitCode : "")) : "",
    e.error ? h("div", { class: "error" }, e.error) : "")));
}

// drawCapture shows each rule of iptables-save -c with its counters and comment.
function drawCapture(text) {
  const rows = [];
  for (const line of (text || "").split("\n")) {
    const m = line.match(/^\[(\d+):(\d+)\] -A (\S+) (.*)$/);
    if (!m) continue;
    const cm = m[4].match(/-m comment --comment (?:"([^"]*)"|(\S+))/);
    const rule = m[4].replace(/-m comment --comment (?:"[^"]*"|\S+) ?/, "");
    rows.push(h("tr", {}, h("td", { class: "num" }, m[1]), h("td", { class: "num" }, m[2]), h("td", { class: "mono" }, m[3]),
      h("td", { class: "mono" }, rule), h("td", {}, cm ? (cm[1] || cm[2]) : "")));
  }
  $("pod-capture").tBodies[0].replaceChildren(...rows);
}

async function restartProxy() {
  const pod = state.pod;
  $("pod-restart-msg").textContent = "restarting…";
  const r = await api("POST", "/v1/pods/" + encodeURIComponent(pod) + "/proxy/restart");
  $("pod-restart-msg").textContent = r.ok ? `epoch ${r.data.epoch} ${r.data.live ? "live" : "started"}` : r.status === 404 ? "this lab has no restart route" : "error: " + (r.data.error || r.data);
  loadPod();
}

// ---- traffic tool ----
// statusClass colours a status: 2xx ok, 4xx warn, 5xx and transport errors bad.
function statusClass(st) {
  if (st === "error") return "bad";
  const n = Number(st);
  return n >= 500 ? "bad" : n >= 400 ? "warn-text" : n >= 200 && n < 300 ? "ok" : "";
}

// answerText names who answered (web.TrafficAnswer).
function answerText(a) {
  switch (a.by) {
    case "app": return a.pod;
    case "sidecar": return "the sidecar itself: no upstream answered (fault abort, no healthy upstream, refused route)";
    case "none": return "no answer (transport error)";
    default: return a.pod || "an upstream app that does not name its pod";
  }
}

// pickCall chooses a call worth sending: a client calling a service it is not part of.
// First a workload's declared upstream (the demo app's app.upstreams), then the busiest
// call the topology saw, then a pod of no service (a client), then any pod outside the
// service with the most pods. With pod set, only calls from that pod are considered.
async function pickCall(pod) {
  const [ob, tp] = await Promise.all([api("GET", "/v1/objects?kind=Workload"), api("GET", "/v1/topology")]);
  const pods = pod ? [pod] : state.pods.map(podKey);
  const topo = tp.ok ? tp.data : { services: [], edges: [] };
  const services = topo.services || [];
  const svcOf = (p) => services.filter((s) => (s.pods || []).includes(p));
  const urlOf = (svc, p) => {
    const info = state.pods.find((x) => podKey(x) === p);
    const host = info && info.namespace !== svc.namespace ? `${svc.name}.${svc.namespace}` : svc.name;
    return `http://${host}:${(svc.ports || [80])[0]}/`;
  };
  for (const w of ob.ok && Array.isArray(ob.data) ? ob.data : []) {
    const ups = (((w.object || {}).spec || {}).app || {}).upstreams || [];
    const p = pods.find((x) => x === w.name || x.startsWith(w.name + "-"));
    if (p && ups.length) return { pod: p, url: ups[0] };
  }
  const calls = (topo.edges || []).filter((e) => pods.includes(e.from) && !svcOf(e.from).some((s) => s.hostname === e.to)).sort((a, b) => b.requests - a.requests);
  const called = calls.length && services.find((s) => s.hostname === calls[0].to);
  if (called) return { pod: calls[0].from, url: urlOf(called, calls[0].from) };
  const big = services.slice().sort((a, b) => (b.pods || []).length - (a.pods || []).length);
  const lone = pods.find((p) => !svcOf(p).length);
  for (const svc of lone ? big.slice(0, 1) : big) {
    const p = lone || pods.find((x) => !(svc.pods || []).includes(x));
    if (p) return { pod: p, url: urlOf(svc, p) };
  }
  return null;
}

// trafficDefaults fills the traffic tool with pickCall's choice until the user picks.
async function trafficDefaults() {
  if (state.trafficTouched) return;
  const before = $("traffic-pod").value + " " + $("traffic-url").value;
  const pick = await pickCall("");
  // Anything set meanwhile (typed, or by a script) wins over the default.
  if (!pick || state.trafficTouched || before !== $("traffic-pod").value + " " + $("traffic-url").value) return;
  $("traffic-pod").value = pick.pod;
  $("traffic-url").value = pick.url;
}

// traceDefault fills the pod page's trace target with a call from that pod, until the
// user types one.
async function traceDefault(pod) {
  if (state.traceTouched) return;
  const before = $("trace-target").value;
  const pick = await pickCall(pod);
  if (pick && !state.traceTouched && state.pod === pod && $("trace-target").value === before) $("trace-target").value = pick.url;
}

async function sendTraffic(ev) {
  ev.preventDefault();
  state.trafficTouched = true;
  const req = { pod: $("traffic-pod").value, url: $("traffic-url").value, n: Number($("traffic-n").value) };
  $("traffic-msg").textContent = "sending…";
  $("traffic-msg").className = "msg";
  $("traffic-result").replaceChildren();
  const r = await api("POST", "/v1/traffic", req);
  if (!r.ok) { $("traffic-msg").textContent = "error: " + (r.data.error || r.data); $("traffic-msg").className = "msg error"; return; }
  $("traffic-msg").textContent = "";
  const res = r.data;
  const bar = (v, total, cls) => { const b = h("span", { class: "bar " + cls }); b.style.width = Math.round((200 * v) / total) + "px"; return b; };
  const total = res.sent || 1;
  const failed = Object.entries(res.statuses || {}).filter(([k]) => statusClass(k) === "bad").reduce((a, [, v]) => a + v, 0);
  // Who answered with what: one row per pod (or the sidecar) and status.
  const answers = res.answers || Object.entries(res.pods || {}).map(([pod, count]) => ({ pod, by: pod ? "app" : "upstream", status: "", count }));
  const byPod = h("table", { class: "grid dist", id: "traffic-answers" },
    h("thead", {}, h("tr", {}, h("th", {}, "answered by"), h("th", {}, "status"), h("th", {}, "count"), h("th", {}, "share"))),
    h("tbody", {}, answers.map((a) => h("tr", { "data-by": a.by, "data-status": a.status, class: statusClass(a.status) === "bad" ? "failed" : "" },
      h("td", { class: a.by === "app" ? "mono" : "msg" }, answerText(a)), h("td", { class: "num " + statusClass(a.status) }, a.status),
      h("td", { class: "num" }, a.count), h("td", {}, bar(a.count, total, statusClass(a.status)), " ", Math.round((100 * a.count) / total) + "%")))));
  const statuses = h("table", { class: "grid dist", id: "traffic-statuses" },
    h("thead", {}, h("tr", {}, h("th", {}, "status"), h("th", {}, "count"), h("th", {}, "share"))),
    h("tbody", {}, Object.entries(res.statuses || {}).sort((a, b) => b[1] - a[1]).map(([k, v]) => h("tr", { class: statusClass(k) === "bad" ? "failed" : "" },
      h("td", { class: "mono " + statusClass(k) }, k), h("td", { class: "num" }, v), h("td", {}, bar(v, total, statusClass(k)), " ", Math.round((100 * v) / total) + "%")))));
  $("traffic-result").replaceChildren(
    h("p", { id: "traffic-latency" }, `${res.sent} sent · `, h("span", { class: failed ? "bad" : "ok" }, failed ? `${failed} failed (${Math.round((100 * failed) / total)}%)` : "all answered without error"),
      ` · latency p50 ${res.p50Ms} ms · p90 ${res.p90Ms} ms · p99 ${res.p99Ms} ms · max ${res.maxMs} ms`),
    h("h2", {}, "Responses by pod"), h("div", { id: "traffic-pods" }, byPod),
    h("h2", {}, "Status codes"), statuses,
    res.errors ? h("ul", { class: "errors" }, res.errors.map((e) => h("li", {}, e))) : "");
}

// ---- config ----
// sdsCell is a proxy's SDS column, from the secrets the proxy itself holds (its
// /config_dump): the discovery server does not serve SDS, the pod's agent does.
function sdsCell(sec) {
  if (!sec) return h("td", { class: "msg", title: "no secrets read from this proxy" }, "-");
  if (sec.error) return h("td", { class: "bad", title: sec.error }, "unreadable");
  const list = (sec.secrets || []).slice().sort((a, b) => (a.kind === "certificate" ? 0 : 1) - (b.kind === "certificate" ? 0 : 1));
  if (!list.length) return h("td", { class: "bad", title: "the proxy holds no secret: its agent has not served one over SDS" }, "none");
  const cert = list.find((x) => x.kind === "certificate"), roots = list.filter((x) => x.kind === "validation");
  const text = list.map((x) => x.name + (x === cert && x.version ? " " + x.version.slice(0, 8) : "")).join(" + ");
  const title = list.map((x) => `${x.name} (${x.kind || "secret"}) version ${x.version || "-"}, taken ${fmtTime(x.lastUpdated)}`).join("\n");
  return h("td", { class: cert && roots.length ? "ok" : "bad", title, "data-sds": list.map((x) => x.name).join(",") }, (cert && roots.length ? "ACTIVE " : "partial ") + text);
}

async function loadConfig() {
  const [ps, sc] = await Promise.all([api("GET", "/v1/proxy-status"), api("GET", "/v1/proxy-secrets")]);
  const secretsOf = {};
  if (sc.ok && Array.isArray(sc.data)) for (const x of sc.data) secretsOf[x.pod] = x;
  if (ps.ok && Array.isArray(ps.data)) {
    const types = ["CDS", "EDS", "LDS", "RDS", "SDS"];
    $("config-proxies").replaceChildren(h("table", { class: "grid" },
      h("thead", {}, h("tr", {}, h("th", {}, "pod"), h("th", {}, "connected"), types.map((t) => h("th", {}, t)))),
      h("tbody", {}, ps.data.map((p) => h("tr", {}, h("td", {}, p.pod || p.nodeID), h("td", {}, p.connected ? "yes" : "no"),
        types.map((t) => {
          if (t === "SDS") return sdsCell(secretsOf[p.pod]);
          const x = (p.types || {})[t];
          if (!x) return h("td", {}, "-");
          const synced = x.sent !== "" && x.sent === x.acked;
          return h("td", { class: synced ? "ok" : "bad", title: x.nackError || "" }, synced ? "SYNCED " + x.acked : `sent ${x.sent} acked ${x.acked}` + (x.nackError ? " NACK" : ""));
        }))))));
  } else $("config-proxies").textContent = ps.status === 404 ? "this lab has no proxy-status route" : JSON.stringify(ps.data);
  const ob = await api("GET", "/v1/objects");
  if (ob.ok && Array.isArray(ob.data)) {
    $("config-objects").textContent = ob.data.map((o) => `${o.kind} ${o.namespace}/${o.name}  (${o.file})`).join("\n") || "(no objects)";
  } else $("config-objects").textContent = "(no objects route in this lab)";
}

// errorsOf splits an apply refusal into one line per problem: the lab names the file,
// the object and the field in each.
function errorsOf(data) {
  if (!data || typeof data !== "object") return [String(data)];
  const msg = data.error || JSON.stringify(data);
  return msg.split("\n").map((l) => l.trim()).filter(Boolean);
}

// parseConfigError reads "…dashboard: Kind namespace/name: field.path: message" (the
// shape of config.Error) into its parts; fields are undefined when the line has another shape.
function parseConfigError(line) {
  const m = line.match(/(?:^|: )dashboard: ([A-Z][A-Za-z]*) ([^\s/]*)\/([^\s:]+): (.*)$/);
  if (!m) return { line };
  const out = { line, kind: m[1], namespace: m[2], name: m[3], msg: m[4] };
  const f = m[4].match(/^([A-Za-z][\w-]*(?:\[[^\]]*\])*(?:\.[\w-]+(?:\[[^\]]*\])*)*): (.*)$/);
  if (f) { out.field = f[1]; out.msg = f[2]; }
  return out;
}

// fieldLine finds the 0-based line of the editor text where the field of the object
// kind/name is set: the object's document, then each key of the path in turn (list
// indexes and map keys in brackets are skipped). -1 when the object is not found.
function fieldLine(text, kind, name, field) {
  const lines = text.split("\n");
  const docs = [];
  let start = 0;
  lines.forEach((l, i) => { if (/^---\s*$/.test(l)) { docs.push([start, i]); start = i + 1; } });
  docs.push([start, lines.length]);
  const esc = (x) => x.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  for (const [a, b] of docs) {
    const doc = lines.slice(a, b);
    const kindAt = doc.findIndex((l) => new RegExp("^kind:\\s*" + esc(kind) + "\\s*$").test(l));
    if (kindAt < 0 || !doc.some((l) => new RegExp("\\bname:\\s*[\"']?" + esc(name) + "[\"']?\\s*(?:[,}#]|$)").test(l))) continue;
    let at = a + kindAt;
    if (!field) return at;
    let from = a;
    for (const key of field.replace(/\[[^\]]*\]/g, "").split(".").filter(Boolean)) {
      const re = new RegExp("(?:^\\s*(?:-\\s+)?|[{,]\\s*)[\"']?" + esc(key) + "[\"']?\\s*:");
      let found = -1;
      for (let i = from; i < b; i++) if (re.test(lines[i])) { found = i; break; }
      if (found < 0) break;
      at = from = found;
    }
    return at;
  }
  return -1;
}

// showConfigErrors lists each problem with its object and field, and highlights the
// field's line in the editor (selected) and in a numbered copy of the text below it.
function showConfigErrors(lines) {
  const ta = $("config-yaml"), text = ta.value, marked = new Set();
  let first = -1;
  $("config-errors").replaceChildren(...lines.map((l) => {
    const e = parseConfigError(l);
    if (!e.kind) return h("li", {}, l);
    const at = fieldLine(text, e.kind, e.name, e.field);
    if (at >= 0) { marked.add(at); if (first < 0) first = at; }
    return h("li", { "data-field": e.field || "" }, h("b", {}, `${e.kind} ${e.namespace}/${e.name}`),
      e.field ? [" · field ", h("code", { class: "field" }, e.field)] : "", at >= 0 ? ` · line ${at + 1}` : "", ": " + e.msg);
  }));
  const hl = $("config-highlight");
  if (first < 0) { hl.hidden = true; return; }
  const all = text.split("\n"), width = String(all.length).length;
  hl.replaceChildren(...all.map((l, i) => h("div", { class: marked.has(i) ? "hl-line" : "", "data-line": i + 1 }, String(i + 1).padStart(width) + " │ " + l)));
  hl.hidden = false;
  const offset = all.slice(0, first).reduce((n, l) => n + l.length + 1, 0);
  ta.focus();
  ta.setSelectionRange(offset, offset + all[first].length);
  ta.scrollTop = Math.max(0, (first - 3) * 16);
}

// changeText words one change of an apply as kubectl does (api.Change.String).
function changeText(c) {
  let s = `${c.kind} ${c.namespace}/${c.name} ${c.action}`;
  if (c.error) s += c.action === "FAILED" ? `: ${c.error}` : ` with errors: ${c.error}`;
  return s;
}

async function applyConfig() {
  $("config-msg").textContent = "applying…";
  $("config-errors").replaceChildren();
  $("config-highlight").hidden = true;
  const r = await api("POST", "/v1/apply", { files: [{ name: "dashboard", data: $("config-yaml").value }] });
  if (r.ok) {
    $("config-msg").textContent = "applied: " + ((r.data.changes || []).map(changeText).join(", ") || "no change");
    loadConfig();
    return;
  }
  $("config-msg").textContent = r.status === 404 ? "this lab has no apply route" : "refused";
  showConfigErrors(errorsOf(r.data));
}

// ---- events ----
// eventGroups are the kind filter's groups: a value ending in ".*" matches a prefix.
const SECURITY = ["cert.", "ca.", "policy."];
function kindMatches(sel, kind) {
  if (!sel) return true;
  if (sel === "@security") return SECURITY.some((p) => kind.startsWith(p));
  if (sel.endsWith(".*")) return kind.startsWith(sel.slice(0, -1));
  return kind === sel;
}

function eventMatches(e) {
  const kind = $("events-kind").value, f = $("events-filter").value.toLowerCase();
  if (!kindMatches(kind, e.kind)) return false;
  return !f || (e.kind + " " + (e.pod || "") + " " + eventMessage(e)).toLowerCase().includes(f);
}

// fmtValue renders a field for people: objects as "k v, k v" (never Go's map[k:v]).
function fmtValue(v) {
  if (v === null || v === undefined) return "";
  if (Array.isArray(v)) return v.map(fmtValue).join(", ");
  if (typeof v === "object") return Object.entries(v).sort((a, b) => (b[1] > a[1] ? 1 : b[1] < a[1] ? -1 : 0)).map(([k, x]) => `${k || "(none)"} ×${fmtValue(x)}`).join(", ");
  return String(v);
}

// eventMessage is the event's one line; a traffic event is written from its fields, and
// any Go map text a message still carries ("map[200:8 503:2]") is rewritten.
function eventMessage(e) {
  const f = e.fields || {};
  if (e.kind === "traffic.sent" && f.statuses && typeof f.statuses === "object") {
    return `sent ${f.n} requests to ${f.url}: ${fmtValue(f.statuses)}` + (f.pods && Object.keys(f.pods).length ? ` · answered by ${fmtValue(f.pods)}` : "");
  }
  return String(e.message || "").replace(/map\[([^\]]*)\]/g, (_, body) => body.split(" ").filter(Boolean).map((kv) => kv.replace(/:(?=[^:]*$)/, " ×")).join(", "));
}

function eventRow(e) {
  return h("tr", { "data-kind": e.kind, class: /\.(nack|failed|exited|refused)$/.test(e.kind) ? "event bad" : "event" },
    h("td", { class: "num" }, e.seq), h("td", {}, new Date(e.time).toLocaleTimeString()),
    h("td", { class: "mono" }, e.kind), h("td", {}, e.pod ? h("a", { href: "#pods/" + encodeURIComponent(e.pod) }, e.pod) : ""), h("td", {}, eventMessage(e)));
}

// A change is what one apply (or the lab coming up) sets off: its config.* events and the
// xDS pushes, ACKs and NACKs to every proxy. They arrive within moments of each other,
// pushes first, so events of these kinds less than CHANGE_GAP_MS apart are one change,
// shown as one row whose counts expand to the pushes of each proxy.
const CHANGE_GAP_MS = 2000;
const inChange = (kind) => kind.startsWith("config.") || ["xds.pushed", "xds.ack", "xds.nack", "xds.connected", "xds.disconnected"].includes(kind);
const grouping = () => $("events-group").checked && !/^(xds|config)\./.test($("events-kind").value);

function eventItems(events) {
  const items = [];
  let open = null;
  for (const e of events) {
    if (!grouping() || !inChange(e.kind)) { items.push(e); continue; }
    const t = Date.parse(e.time);
    if (!open || t - open.last > CHANGE_GAP_MS) { open = { group: true, events: [], last: t }; items.push(open); }
    open.events.push(e);
    open.last = t;
  }
  return items;
}

// changeSummary counts a change's events: the objects it changed, pushes, ACKs and NACKs.
function changeSummary(g) {
  const objects = [], pods = new Set(), types = new Set(), nacks = [];
  let pushed = 0, acked = 0, connected = 0, disconnected = 0;
  for (const e of g.events) {
    if (e.pod) pods.add(e.pod);
    const type = (e.fields || {}).type;
    if (e.kind.startsWith("config.")) objects.push(`${e.message} ${e.kind.slice(7)}`);
    else if (e.kind === "xds.pushed") { pushed++; if (type) types.add(type); }
    else if (e.kind === "xds.ack") acked++;
    else if (e.kind === "xds.nack") nacks.push(e);
    else if (e.kind === "xds.connected") connected++;
    else if (e.kind === "xds.disconnected") disconnected++;
  }
  return { objects, pods, types, nacks, pushed, acked, connected, disconnected };
}

function changeRow(g) {
  const c = changeSummary(g), first = g.events[0], last = g.events[g.events.length - 1];
  const key = String(first.seq);
  const what = c.objects.length ? c.objects.join(", ") : c.connected ? `${c.connected} prox${c.connected === 1 ? "y" : "ies"} connected` : c.disconnected ? `${c.disconnected} prox${c.disconnected === 1 ? "y" : "ies"} disconnected` : "config pushed";
  const parts = [h("b", {}, what)];
  if (c.pushed) parts.push(` → pushed ${c.pushed} (${[...c.types].sort().join(", ")}) to ${c.pods.size} prox${c.pods.size === 1 ? "y" : "ies"}`, ` · ${c.acked} ACKed`);
  const waiting = c.pushed - c.acked - c.nacks.length;
  if (waiting > 0) parts.push(h("span", { class: "warn-text" }, ` · ${waiting} not answered yet`));
  if (c.nacks.length) parts.push(h("span", { class: "bad" }, ` · ${c.nacks.length} NACK: ${c.nacks[0].pod || ""} ${c.nacks[0].message}`));
  // The expanded view: one line per proxy with what it was sent and what it answered.
  const byPod = {};
  for (const e of g.events) if (e.kind.startsWith("xds.")) (byPod[e.pod || (e.fields || {}).node || "?"] = byPod[e.pod || (e.fields || {}).node || "?"] || []).push(e);
  const detail = h("ul", { class: "change-pods" }, Object.entries(byPod).sort().map(([pod, evs]) => {
    const sent = evs.filter((e) => e.kind === "xds.pushed").map((e) => e.message);
    const acks = evs.filter((e) => e.kind === "xds.ack").length, nk = evs.filter((e) => e.kind === "xds.nack");
    return h("li", { "data-pod": pod }, h("a", { href: "#pods/" + encodeURIComponent(pod) }, pod), ": ",
      sent.length ? `pushed ${sent.join(", ")} · ${acks} ACKed` : evs.map((e) => e.kind.slice(4)).join(", "),
      nk.map((e) => h("div", { class: "bad" }, "NACK " + e.message)));
  }));
  const det = h("details", { class: "change", "data-group": key }, h("summary", {}, ...parts), detail);
  if (state.openChanges.has(key)) det.open = true;
  det.addEventListener("toggle", () => { if (det.open) state.openChanges.add(key); else state.openChanges.delete(key); });
  const seqs = first.seq === last.seq ? String(first.seq) : `${first.seq}–${last.seq}`;
  return h("tr", { class: "change-row" + (c.nacks.length ? " bad" : ""), "data-kind": "change", "data-events": g.events.length, "data-pushed": c.pushed, "data-acked": c.acked },
    h("td", { class: "num" }, seqs), h("td", {}, new Date(first.time).toLocaleTimeString()),
    h("td", { class: "mono" }, c.objects.length ? "config change" : "xds"),
    h("td", {}, c.pods.size === 1 ? [...c.pods][0] : c.pods.size ? `${c.pods.size} proxies` : ""), h("td", {}, det));
}

function redrawEvents() {
  const shown = state.events.filter(eventMatches);
  const rows = eventItems(shown).reverse().map((x) => (x.group ? changeRow(x) : eventRow(x)));
  $("events").tBodies[0].replaceChildren(...rows);
  $("events-count").textContent = `${rows.length} rows · ${shown.length} of ${state.events.length} events`;
}

// Events arrive in bursts (a change is dozens): the table is redrawn at most every 200 ms.
let eventsTimer = null;
function scheduleEvents() {
  if (eventsTimer) return;
  eventsTimer = setTimeout(() => { eventsTimer = null; redrawEvents(); }, 200);
}

function addEvent(e) {
  if (state.events.length && e.seq <= state.events[state.events.length - 1].seq) return; // replayed after a reconnect
  state.events.push(e);
  if (state.events.length > MAX_EVENTS) state.events.shift();
  if (!state.kinds.has(e.kind)) {
    state.kinds.add(e.kind);
    const group = e.kind.split(".")[0] + ".*";
    if (!state.kinds.has(group)) {
      state.kinds.add(group);
      $("events-kind").append(h("option", { value: group }, group));
    }
    $("events-kind").append(h("option", { value: e.kind }, e.kind));
  }
  scheduleEvents();
  if (e.kind === "lab.down") labStopping(e);
  if (/^(pod|epoch|process|cert|fault)\./.test(e.kind)) scheduleReload(e.pod);
}

let reloadTimer = null;
function scheduleReload(pod) {
  if (reloadTimer) return;
  reloadTimer = setTimeout(() => {
    reloadTimer = null;
    loadPods();
    if (state.view === "pods" && (pod === state.pod || (pod || "").split(",").includes(state.pod))) loadPod();
  }, 300);
}

let eventSource = null;
function startEvents() {
  if (eventSource || state.dead) return;
  const last = state.events.length ? state.events[state.events.length - 1].seq : 0;
  eventSource = new EventSource("/v1/events" + (last ? "?after=" + last : ""));
  eventSource.onopen = () => { $("conn").textContent = "live"; $("conn").classList.add("live"); };
  eventSource.onerror = () => { $("conn").textContent = "reconnecting"; $("conn").classList.remove("live"); checkAlive(); };
  eventSource.onmessage = (m) => addEvent(JSON.parse(m.data));
}

// ---- a lab that stopped ----
// When the event stream breaks the page asks the lab whether it is still there. A lab
// that answers no more (stopped by `meshlab down`, or its process gone) is shown as dead:
// a banner, the topology greyed with every pod "unknown" (nothing stale stays green),
// and the streams closed. The page keeps asking and reloads once the lab answers again.
let aliveTimer = null;
async function checkAlive() {
  if (aliveTimer) return;
  let verdict;
  try {
    const ctl = new AbortController();
    const to = setTimeout(() => ctl.abort(), 3000);
    const r = await fetch("/v1/lab", { signal: ctl.signal, cache: "no-store" });
    clearTimeout(to);
    verdict = r.ok ? "alive" : r.status === 401 || r.status === 403 ? "session" : "error";
  } catch (_) {
    verdict = "gone";
  }
  if (verdict === "alive") {
    if (state.dead) { location.reload(); return; } // the lab is back: start afresh
    return;
  }
  if (verdict === "gone" || verdict === "session") labDead(verdict);
  aliveTimer = setTimeout(() => { aliveTimer = null; checkAlive(); }, 2000);
}

function labStopping(e) {
  state.stopping = true;
  showBanner("stopping", `Lab ${state.labName || ""} is stopping (${new Date(e.time).toLocaleTimeString()}): its pods and proxies are being removed.`);
}

function labDead(why) {
  const first = !state.dead;
  state.dead = true;
  document.body.classList.add("lab-dead");
  if (first) state.deadSince = new Date();
  const since = state.deadSince.toLocaleTimeString();
  showBanner("dead", why === "session"
    ? `Lab ${state.labName || ""} no longer accepts this page's session (since ${since}): it was restarted. Open the new link \`meshlab up\` printed, or run meshlab dashboard.`
    : `Lab ${state.labName || ""} is down (since ${since})${state.stopping ? ": it was stopped" : ": its process is gone"}. Nothing on this page is live; pods and edges are shown as unknown. Start it again with meshlab up: this page reloads when it answers.`);
  $("conn").textContent = "lab down";
  $("conn").classList.remove("live");
  if (eventSource) { eventSource.close(); eventSource = null; }
  stopTopology();
  stopPod();
  if (state.topology) drawTopology(state.topology);
}

function showBanner(kind, text) {
  const b = $("lab-banner");
  b.className = "banner " + kind;
  b.textContent = text;
  b.hidden = false;
}

// ---- start ----
window.addEventListener("DOMContentLoaded", async () => {
  $("pod-select").addEventListener("change", (ev) => { location.hash = "#pods/" + encodeURIComponent(ev.target.value); });
  $("pod-restart").addEventListener("click", restartProxy);
  $("traffic-form").addEventListener("submit", sendTraffic);
  $("config-apply").addEventListener("click", applyConfig);
  $("pod-fault-add").addEventListener("click", addFault);
  $("pod-fault-clear").addEventListener("click", clearPodFaults);
  $("pod-fault-kind").addEventListener("change", () => { $("pod-fault-delay-label").hidden = $("pod-fault-kind").value !== "delay-push"; });
  $("hist-diff").addEventListener("click", showDiff);
  for (const id of ["hist-from", "hist-to"]) $(id).addEventListener("change", () => { $(id).dataset.picked = "1"; });
  $("events-filter").addEventListener("input", redrawEvents);
  $("events-kind").addEventListener("change", redrawEvents);
  $("events-group").addEventListener("change", redrawEvents);
  window.addEventListener("hashchange", route);
  const lab = await api("GET", "/v1/lab");
  if (lab.ok) { state.labName = lab.data.name; $("lab-name").textContent = lab.data.name + " · " + lab.data.scenario; document.title = "meshlab " + lab.data.name; }
  for (const id of ["traffic-pod", "traffic-url"]) $(id).addEventListener("change", () => { state.trafficTouched = true; });
  $("trace-target").addEventListener("input", () => { state.traceTouched = true; });
  await loadPods();
  trafficDefaults();
  startEvents();
  route();
});
