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
  if (state.view === "topology") { startTopology(); loadGuide(); } else stopTopology();
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
    if (!("(no service)" in state.levels)) state.levels["(no service)"] = 0; // callers of no service sit left too
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
    b.xy = b.pods.map((p, i) => {
      const px = named ? pos[b.id].x + 14 : pos[b.id].x + 14 + (i % perRow) * 18;
      const py = named ? y + 48 + i * 16 : y + 48 + Math.floor(i / perRow) * 18;
      if (b.id === podService[p]) podPos[p] = { x: px, y: py }; // edges start at the pod's first service
      return { x: px, y: py };
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
    for (const [i, name] of b.pods.entries()) {
      const pp = b.xy[i], info = podInfo[name] || {};
      const c = s("circle", { cx: pp.x, cy: pp.y, r: 6, class: "pod " + (info.ready ? "ready" : "unready") + (info.rbacDenied > 0 ? " denying" : "") });
      c.append(s("title", {}, `${name} ${info.ip || ""} epoch ${info.epoch}` + (info.rbacDenied > 0 ? ` · ${info.rbacDenied} denied by RBAC` : "")));
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
    const cls = "edge" + (e.rps > 0 ? " busy" : "") + (e.errorRate > 0 ? " errors" : "") + (e.mtls ? " mtls" : " plain") + (e.denied > 0 ? " denied" : "");
    const path = s("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: cls, "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to });
    path.append(s("title", {}, edgeTitle(e)));
    svg.append(path);
    const label = `${e.rps.toFixed(1)} rps · ${(e.errorRate * 100).toFixed(0)}% 5xx · ${e.mtls ? "mTLS" : "plaintext"}${e.denied > 0 ? ` · ${e.denied} denied` : ""}`;
    const fromBox = pos[podService[e.from]];
    const lx = fromBox && fromBox.x + fromBox.w < x2 ? fromBox.x + fromBox.w + 8 : mx;
    svg.append(s("text", { x: lx, y: y2 - 6, class: "edge-label" + (e.denied > 0 ? " denied" : "") }, label));
  }
  $("topo-graph").replaceChildren(svg);
  const svcsOf = {};
  for (const svc of t.services) for (const p of svc.pods) (svcsOf[p] = svcsOf[p] || []).push(svc.name);
  $("topo-pods").tBodies[0].replaceChildren(...t.pods.map((p) => h("tr", {},
    h("td", {}, h("a", { href: "#pods/" + encodeURIComponent(p.name) }, p.name)), h("td", {}, p.namespace), h("td", {}, p.ip),
    h("td", { class: p.ready ? "ok" : "bad" }, p.ready ? "ready" : "not ready"), h("td", { class: "num" }, p.epoch < 0 ? "-" : p.epoch),
    h("td", { class: "num" + (p.rbacDenied > 0 ? " bad" : "") }, p.rbacDenied || 0),
    h("td", {}, (svcsOf[p.name] || []).join(", ")))));
}

// edgeTitle explains how an edge's mTLS and denials were measured.
function edgeTitle(e) {
  const tls = e.mtls ? `mTLS: ${e.handshakes || 0} TLS handshakes, ${e.mtlsEndpoints || 0} endpoints matched tlsMode-istio`
    : `plaintext: no TLS handshake${e.plaintextEndpoints ? `, ${e.plaintextEndpoints} endpoints matched the raw (tlsMode-disabled) socket` : ""}`;
  return `${e.from} → ${e.to}: ${e.requests} requests, ${e.errors} 5xx, ${e.denied || 0} denied (403); ${tls}`;
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

async function applyConfig() {
  $("config-msg").textContent = "applying…";
  $("config-errors").replaceChildren();
  $("config-highlight").hidden = true;
  const r = await api("POST", "/v1/apply", { files: [{ name: "dashboard", data: $("config-yaml").value }] });
  if (r.ok) {
    $("config-msg").textContent = "applied: " + ((r.data.changes || []).join(", ") || "no change");
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
    const group = e.kind.split(".")[0] + ".*";
    if (!state.kinds.has(group)) {
      state.kinds.add(group);
      $("events-kind").append(h("option", { value: group }, group));
    }
    $("events-kind").append(h("option", { value: e.kind }, e.kind));
  }
  if (eventMatches(e)) {
    const body = $("events").tBodies[0];
    body.prepend(eventRow(e));
    while (body.rows.length > MAX_EVENTS) body.deleteRow(-1);
  }
  $("events-count").textContent = `${$("events").tBodies[0].rows.length} of ${state.events.length}`;
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
  $("pod-fault-add").addEventListener("click", addFault);
  $("pod-fault-clear").addEventListener("click", clearPodFaults);
  $("pod-fault-kind").addEventListener("change", () => { $("pod-fault-delay-label").hidden = $("pod-fault-kind").value !== "delay-push"; });
  $("hist-diff").addEventListener("click", showDiff);
  for (const id of ["hist-from", "hist-to"]) $(id).addEventListener("change", () => { $(id).dataset.picked = "1"; });
  $("events-filter").addEventListener("input", redrawEvents);
  $("events-kind").addEventListener("change", redrawEvents);
  window.addEventListener("hashchange", route);
  const lab = await api("GET", "/v1/lab");
  if (lab.ok) { $("lab-name").textContent = lab.data.name + " · " + lab.data.scenario; document.title = "meshlab " + lab.data.name; }
  await loadPods();
  startEvents();
  route();
});
