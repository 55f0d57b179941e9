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
const state = { view: "topology", pod: "", topology: null, pods: [], events: [], kinds: new Set(), levels: {} };

// ---- navigation ----
function route() {
  const [view, arg] = (location.hash.slice(1) || "topology").split("/");
  state.view = ["topology", "pods", "traffic", "config", "events"].includes(view) ? view : "topology";
  for (const sec of document.querySelectorAll(".view")) sec.classList.toggle("active", sec.id === "view-" + state.view);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === state.view);
  if (state.view === "topology") startTopology(); else stopTopology();
  if (state.view === "pods") {
    if (arg) state.pod = decodeURIComponent(arg);
    showPod();
  } else stopPod();
  if (state.view === "config") loadConfig();
}

// ---- pods list (selects) ----
async function loadPods() {
  const r = await api("GET", "/v1/pods");
  if (!r.ok) return;
  state.pods = r.data || [];
  for (const sel of [$("pod-select"), $("traffic-pod")]) {
    const cur = sel.value;
    sel.replaceChildren(...state.pods.map((p) => h("option", { value: p.name }, p.name)));
    if (cur) sel.value = cur;
  }
  if (!state.pod && state.pods.length) state.pod = state.pods[0].name;
  $("pod-select").value = state.pod;
}

// ---- topology ----
let topoSource = null;
function startTopology() {
  if (topoSource) return;
  topoSource = new EventSource("/v1/topology/stream");
  topoSource.onmessage = (m) => { state.topology = JSON.parse(m.data); drawTopology(state.topology); };
}
function stopTopology() { if (topoSource) { topoSource.close(); topoSource = null; } }

// levels places a service one column right of every service whose pods call it (as far
// as the traffic seen so far tells), so callers sit left of callees and stay there.
function levels(t, podService) {
  const lv = state.levels;
  for (const svc of t.services) if (!(svc.hostname in lv)) lv[svc.hostname] = 0;
  for (let i = 0; i < t.services.length; i++) {
    let changed = false;
    for (const e of t.edges) {
      const from = podService[e.from];
      if (!from || !(e.to in lv) || from === e.to) continue;
      if (lv[e.to] < lv[from] + 1) { lv[e.to] = lv[from] + 1; changed = true; }
    }
    if (!changed) break;
  }
  return lv;
}

function drawTopology(t) {
  const podService = {}, podInfo = {};
  for (const p of t.pods) podInfo[p.name] = p;
  for (const svc of t.services) for (const p of svc.pods) if (!(p in podService)) podService[p] = svc.hostname;
  const boxes = t.services.map((svc) => ({ id: svc.hostname, title: svc.name + "." + svc.namespace, sub: svc.vip + " :" + (svc.ports || []).join(","), pods: svc.pods }));
  const lone = t.pods.filter((p) => !(p.name in podService)).map((p) => p.name);
  if (lone.length) {
    boxes.push({ id: "(no service)", title: "pods of no service", sub: "", pods: lone });
    for (const p of lone) podService[p] = "(no service)";
  }
  const lv = levels(t, podService);
  // Layout: columns by level, boxes stacked; pods as dots, named when there are few.
  const colW = 340, boxW = 200, perRow = 10, gap = 24, cols = {};
  const pos = {}, podPos = {};
  for (const b of boxes) {
    const col = lv[b.id] || 0;
    const named = b.pods.length <= 8;
    const bh = 44 + (named ? b.pods.length * 16 : Math.ceil(b.pods.length / perRow) * 18);
    const y = cols[col] || 10;
    cols[col] = y + bh + gap;
    pos[b.id] = { x: 10 + col * colW, y, w: boxW, h: bh, named };
    b.pods.forEach((p, i) => {
      const px = named ? pos[b.id].x + 14 : pos[b.id].x + 14 + (i % perRow) * 18;
      const py = named ? y + 48 + i * 16 : y + 48 + Math.floor(i / perRow) * 18;
      podPos[p] = { x: px, y: py };
    });
  }
  const width = Math.max(600, (Math.max(0, ...Object.keys(cols).map(Number)) + 1) * colW + 40);
  const height = Math.max(160, ...Object.values(cols)) + 10;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, width, height, preserveAspectRatio: "xMinYMin meet", role: "img", "aria-label": "mesh topology" });
  svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#7a8794" }))));
  for (const b of boxes) {
    const p = pos[b.id];
    const g = s("g", { class: "svc" });
    g.append(s("rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: 8 }));
    g.append(s("text", { x: p.x + 8, y: p.y + 17, class: "title" }, b.title));
    g.append(s("text", { x: p.x + 8, y: p.y + 32 }, b.sub));
    for (const name of b.pods) {
      const pp = podPos[name], info = podInfo[name] || {};
      const c = s("circle", { cx: pp.x, cy: pp.y, r: 6, class: "pod " + (info.ready ? "ready" : "unready") });
      c.append(s("title", {}, `${name} ${info.ip || ""} epoch ${info.epoch}`));
      c.addEventListener("click", () => { location.hash = "#pods/" + encodeURIComponent(name); });
      g.append(c);
      if (p.named) g.append(s("text", { x: pp.x + 10, y: pp.y + 4, class: "pod-name" }, name));
    }
    svg.append(g);
  }
  for (const e of t.edges) {
    const from = podPos[e.from], to = pos[e.to];
    if (!from || !to) continue;
    const x2 = to.x, y2 = to.y + 20;
    const x1 = from.x + 6, y1 = from.y;
    const mx = (x1 + x2) / 2;
    const cls = "edge" + (e.rps > 0 ? " busy" : "") + (e.errorRate > 0 ? " errors" : "");
    svg.append(s("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: cls, "marker-end": "url(#arrow)" }));
    const label = `${e.rps.toFixed(1)} rps · ${(e.errorRate * 100).toFixed(0)}% 5xx${e.mtls ? " · mTLS" : ""}`;
    const fromBox = pos[podService[e.from]];
    const lx = fromBox && fromBox.x + fromBox.w < x2 ? fromBox.x + fromBox.w + 8 : mx;
    svg.append(s("text", { x: lx, y: y2 - 6, class: "edge-label" }, label));
  }
  $("topo-graph").replaceChildren(svg);
  const svcsOf = {};
  for (const svc of t.services) for (const p of svc.pods) (svcsOf[p] = svcsOf[p] || []).push(svc.name);
  $("topo-pods").tBodies[0].replaceChildren(...t.pods.map((p) => h("tr", {},
    h("td", {}, h("a", { href: "#pods/" + encodeURIComponent(p.name) }, p.name)), h("td", {}, p.namespace), h("td", {}, p.ip),
    h("td", { class: p.ready ? "ok" : "bad" }, p.ready ? "ready" : "not ready"), h("td", { class: "num" }, p.epoch < 0 ? "-" : p.epoch),
    h("td", {}, (svcsOf[p.name] || []).join(", ")))));
}

// ---- pod page ----
let podTimer = null;
function stopPod() { clearInterval(podTimer); podTimer = null; }
function showPod() {
  stopPod();
  if (!state.pod) return;
  $("pod-select").value = state.pod;
  loadPod();
  podTimer = setInterval(loadPod, 2000);
}

async function loadPod() {
  const pod = state.pod;
  const r = await api("GET", "/v1/pods/" + encodeURIComponent(pod) + "/inspect?lines=40");
  if (pod !== state.pod) return;
  if (!r.ok) { $("pod-agent").textContent = "error: " + (r.data.error || r.data); return; }
  const pi = r.data;
  drawEpochs(pi);
  $("pod-xds").tBodies[0].replaceChildren(...pi.xds.map((x) => h("tr", {},
    h("td", { class: "mono" }, x.typeUrl.replace("type.googleapis.com/", "")), h("td", {}, x.sent), h("td", {}, x.acked), h("td", { class: "mono" }, x.nonce),
    h("td", { class: x.synced ? "ok" : "bad" }, x.synced ? "ACK" : (x.acked === x.sent ? "pending" : "NACK / pending")),
    h("td", { class: "error" }, x.nackError ? `${x.nackError} (${new Date(x.lastNack).toLocaleTimeString()})` : ""))));
  if (!pi.xds.length) $("pod-xds").tBodies[0].replaceChildren(h("tr", {}, h("td", { colspan: 6 }, pi.xdsConnected ? "connected, nothing requested" : "no xDS stream")));
  drawCapture(pi.capture);
  $("pod-capture-error").textContent = pi.captureError || "";
  for (const name of ["proxy", "app", "agent"]) $("log-" + name).textContent = (pi.logs[name] || []).join("\n");
  // Certificate details come from the pod detail route (GET /v1/pods/:pod) when the lab has it.
  const d = await api("GET", "/v1/pods/" + encodeURIComponent(pod));
  if (d.ok && d.data && typeof d.data === "object" && (d.data.certificate || d.data.cert)) {
    const c = d.data.certificate || d.data.cert;
    $("pod-cert").textContent = Object.entries(c).map(([k, v]) => `${k}: ${v}`).join("   ");
  }
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
async function sendTraffic(ev) {
  ev.preventDefault();
  const req = { pod: $("traffic-pod").value, url: $("traffic-url").value, n: Number($("traffic-n").value) };
  $("traffic-msg").textContent = "sending…";
  $("traffic-result").replaceChildren();
  const r = await api("POST", "/v1/traffic", req);
  if (!r.ok) { $("traffic-msg").textContent = "error: " + (r.data.error || r.data); return; }
  $("traffic-msg").textContent = "";
  const res = r.data;
  const dist = (title, counts) => {
    const total = Object.values(counts).reduce((a, b) => a + b, 0) || 1;
    return h("table", { class: "grid dist" }, h("thead", {}, h("tr", {}, h("th", {}, title), h("th", {}, "count"), h("th", {}, "share"))),
      h("tbody", {}, Object.entries(counts).sort((a, b) => b[1] - a[1]).map(([k, v]) => {
        const bar = h("span", { class: "bar" });
        bar.style.width = Math.round((200 * v) / total) + "px";
        return h("tr", {}, h("td", { class: "mono" }, k || "(no pod field)"), h("td", { class: "num" }, v), h("td", {}, bar, " ", Math.round((100 * v) / total) + "%"));
      })));
  };
  $("traffic-result").replaceChildren(
    h("p", { id: "traffic-latency" }, `${res.sent} sent · latency p50 ${res.p50Ms} ms · p90 ${res.p90Ms} ms · p99 ${res.p99Ms} ms · max ${res.maxMs} ms`),
    h("h2", {}, "Responses by pod"), h("div", { id: "traffic-pods" }, dist("pod", res.pods)),
    h("h2", {}, "Status codes"), dist("status", res.statuses),
    res.errors ? h("ul", { class: "errors" }, res.errors.map((e) => h("li", {}, e))) : "");
}

// ---- config ----
async function loadConfig() {
  const ps = await api("GET", "/v1/proxy-status");
  if (ps.ok && Array.isArray(ps.data)) {
    const types = ["CDS", "EDS", "LDS", "RDS", "SDS"];
    $("config-proxies").replaceChildren(h("table", { class: "grid" },
      h("thead", {}, h("tr", {}, h("th", {}, "pod"), h("th", {}, "connected"), types.map((t) => h("th", {}, t)))),
      h("tbody", {}, ps.data.map((p) => h("tr", {}, h("td", {}, p.pod || p.nodeID), h("td", {}, p.connected ? "yes" : "no"),
        types.map((t) => {
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

async function applyConfig() {
  $("config-msg").textContent = "applying…";
  $("config-errors").replaceChildren();
  const r = await api("POST", "/v1/apply", { files: [{ name: "dashboard", data: $("config-yaml").value }] });
  if (r.ok) {
    $("config-msg").textContent = "applied: " + ((r.data.changes || []).join(", ") || "no change");
    loadConfig();
    return;
  }
  $("config-msg").textContent = r.status === 404 ? "this lab has no apply route" : "refused";
  $("config-errors").replaceChildren(...errorsOf(r.data).map((e) => h("li", {}, e)));
}

// ---- events ----
function eventMatches(e) {
  const kind = $("events-kind").value, f = $("events-filter").value.toLowerCase();
  if (kind && e.kind !== kind) return false;
  return !f || (e.kind + " " + (e.pod || "") + " " + e.message).toLowerCase().includes(f);
}

function eventRow(e) {
  return h("tr", { "data-kind": e.kind }, h("td", { class: "num" }, e.seq), h("td", {}, new Date(e.time).toLocaleTimeString()),
    h("td", { class: "mono" }, e.kind), h("td", {}, e.pod ? h("a", { href: "#pods/" + encodeURIComponent(e.pod) }, e.pod) : ""), h("td", {}, e.message));
}

function redrawEvents() {
  const rows = state.events.filter(eventMatches).reverse().map(eventRow);
  $("events").tBodies[0].replaceChildren(...rows);
  $("events-count").textContent = `${rows.length} of ${state.events.length}`;
}

function addEvent(e) {
  state.events.push(e);
  if (state.events.length > MAX_EVENTS) state.events.shift();
  if (!state.kinds.has(e.kind)) {
    state.kinds.add(e.kind);
    $("events-kind").append(h("option", { value: e.kind }, e.kind));
  }
  if (eventMatches(e)) {
    const body = $("events").tBodies[0];
    body.prepend(eventRow(e));
    while (body.rows.length > MAX_EVENTS) body.deleteRow(-1);
  }
  $("events-count").textContent = `${$("events").tBodies[0].rows.length} of ${state.events.length}`;
  if (e.kind.startsWith("pod.") || e.kind.startsWith("epoch.") || e.kind.startsWith("process.")) scheduleReload(e.pod);
}

let reloadTimer = null;
function scheduleReload(pod) {
  if (reloadTimer) return;
  reloadTimer = setTimeout(() => {
    reloadTimer = null;
    loadPods();
    if (state.view === "pods" && pod === state.pod) loadPod();
  }, 300);
}

function startEvents() {
  const es = new EventSource("/v1/events");
  es.onopen = () => { $("conn").textContent = "live"; $("conn").classList.add("live"); };
  es.onerror = () => { $("conn").textContent = "reconnecting"; $("conn").classList.remove("live"); };
  es.onmessage = (m) => addEvent(JSON.parse(m.data));
}

// ---- start ----
window.addEventListener("DOMContentLoaded", async () => {
  $("pod-select").addEventListener("change", (ev) => { location.hash = "#pods/" + encodeURIComponent(ev.target.value); });
  $("pod-restart").addEventListener("click", restartProxy);
  $("traffic-form").addEventListener("submit", sendTraffic);
  $("config-apply").addEventListener("click", applyConfig);
  $("events-filter").addEventListener("input", redrawEvents);
  $("events-kind").addEventListener("change", redrawEvents);
  window.addEventListener("hashchange", route);
  const lab = await api("GET", "/v1/lab");
  if (lab.ok) { $("lab-name").textContent = lab.data.name + " · " + lab.data.scenario; document.title = "meshlab " + lab.data.name; }
  await loadPods();
  startEvents();
  route();
});
