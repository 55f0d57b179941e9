// meshlab dashboard: "Trace a request" (POST /v1/trace, as `meshlab trace`): one request
// from a pod, drawn as a vertical path of hops: the capture rules it hit, each sidecar's
// listener, filter chain, route and cluster with the Istio object that generated them,
// the endpoint, mTLS and the peer's identity, the RBAC decision and the app's answer.
"use strict";

// ORIGIN_KINDS names the kinds whose path segment is not simply the kind in kebab case.
const ORIGIN_KINDS = { services: "Service", configmaps: "ConfigMap", pods: "Pod", namespaces: "Namespace", serviceaccounts: "ServiceAccount" };

// originLabel names the config object of an origin path
// ("/apis/networking.istio.io/v1alpha3/namespaces/default/virtual-service/backend" is
// "VirtualService default/backend"); other shapes are shown as they are.
function originLabel(path) {
  const m = String(path || "").match(/\/namespaces\/([^/]+)\/([^/]+)\/([^/]+)$/);
  if (!m) return path;
  const kind = ORIGIN_KINDS[m[2]] || m[2].split("-").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
  return `${kind} ${m[1]}/${m[3]}`;
}

// ruleText is an iptables-save rule without its "-A CHAIN" and its comment (shown apart).
function ruleText(r) {
  return r.rule.replace(/^-A \S+ /, "").replace(/-m comment --comment (?:"[^"]*"|\S+) ?/, "").trim();
}

function traceResource(r) {
  if (!r) return h("span", { class: "msg" }, "-");
  return h("span", {}, h("code", {}, r.name),
    r.origin ? h("span", { class: "origin", title: r.origin }, " ← ", originLabel(r.origin)) : h("span", { class: "msg" }, " (no origin)"));
}

function traceRows(hop) {
  const rows = [];
  const add = (k, v) => rows.push(h("tr", { "data-field": k }, h("th", {}, k), h("td", {}, v)));
  if (hop.kind === "capture") {
    if (!(hop.rules || []).length) add("rules", h("span", { class: "msg" }, "no nat rule counted a packet"));
    for (const r of hop.rules || []) {
      add(`${r.table}/${r.chain}`, h("span", {}, h("b", {}, `+${r.packets} pkt `), h("code", { title: r.rule }, ruleText(r)),
        r.comment ? h("div", { class: "msg" }, r.comment) : ""));
    }
  } else if (hop.kind === "proxy") {
    add("listener", traceResource(hop.listener));
    add("filter chain", traceResource(hop.filterChain));
    if (hop.virtualHost) add("virtual host", traceResource(hop.virtualHost));
    if (hop.route) add("route", traceResource(hop.route));
    if (hop.cluster) add("cluster", traceResource(hop.cluster));
    if (hop.endpoint) add("endpoint", h("code", {}, hop.endpoint));
    const peer = hop.direction === "inbound" ? "from" : "to";
    add("mTLS", hop.mtls ? h("span", { class: "ok" }, `mTLS ${peer} `, h("code", {}, hop.peerIdentity || "(no peer identity)"))
      : h("span", { class: "msg" }, "plaintext"));
    add("RBAC", hop.rbac ? h("span", { class: hop.rbac === "denied" ? "bad" : "ok" }, hop.rbac) : h("span", { class: "msg" }, "no policy"));
    const f = hop.fault;
    if (f && f.delay) {
      add("fault delay", h("span", { class: "fault" }, f.delayMs !== null ? `≈${f.delayMs} ms` : "a delay", " injected by this sidecar's fault filter (response flag DI)",
        hop.route && hop.route.origin ? ` from ${originLabel(hop.route.origin)}` : ""));
    }
    if (f && f.abort) {
      add("fault abort", h("span", { class: "bad" }, `answered by this sidecar's fault filter (response flag FI)`, hop.route && hop.route.origin ? ` from ${originLabel(hop.route.origin)}` : "", ": the request never reached the upstream"));
    }
    if (hop.upstreamServiceTimeMs !== undefined && hop.upstreamServiceTimeMs !== null) {
      if (f && f.delay && f.delayMs !== null) {
        add("upstream time", `${hop.upstreamServiceTimeMs} ms as the sidecar reported it (x-envoy-upstream-service-time, counted from after the fault filter's ≈${f.delayMs} ms delay); the destination answered in ${f.destinationMs} ms`);
      } else add("upstream time", `${hop.upstreamServiceTimeMs} ms`);
    }
    const stats = Object.entries(hop.stats || {}).sort();
    if (stats.length) {
      add("stats", h("details", {}, h("summary", {}, `${stats.length} counters rose`),
        h("ul", { class: "mono" }, stats.map(([k, v]) => h("li", {}, `${k} +${v}`)))));
    }
  } else if (hop.kind === "ztunnel") { // the node's ztunnel, for an ambient pod: from its access log line
    if (hop.listener) add("listener", h("code", {}, hop.listener.name));
    if (hop.protocol) add("protocol", hop.protocol === "HBONE" ? h("span", { class: "ok" }, "HBONE (HTTP/2 CONNECT over mTLS)") : h("span", { class: "msg" }, hop.protocol));
    if (hop.endpoint) add("endpoint", h("code", {}, hop.endpoint));
    if (hop.target) add(":authority", h("code", {}, hop.target));
    if (hop.protocol) {
      const peer = hop.direction === "inbound" ? "from" : "to";
      add("mTLS", hop.mtls ? h("span", { class: "ok" }, `mTLS ${peer} `, h("code", {}, hop.peerIdentity || "(no peer identity)")) : h("span", { class: "msg" }, "plaintext"));
    }
    if (hop.rbac) add("L4 policy", h("span", { class: hop.rbac === "denied" ? "bad" : "ok" }, hop.rbac));
    if (typeof hop.durationMs === "number") add("duration", `${hop.durationMs} ms`);
    if (hop.accessLog) add("access log", h("code", { class: "mono" }, hop.accessLog));
  } else if (hop.kind === "app") {
    if (hop.version) add("version", hop.version);
    add("status", h("span", { class: hop.status >= 200 && hop.status < 400 ? "ok" : "bad" }, hop.status || "-"));
  }
  if (hop.notes) add("notes", hop.notes);
  return rows;
}

function traceHopTitle(hop) {
  switch (hop.kind) {
    case "capture": return `capture · iptables in ${hop.pod}`;
    case "proxy": return `${hop.direction || ""} sidecar · ${hop.pod}`;
    case "ztunnel": return `${hop.direction || ""} ztunnel · ${hop.pod}`;
    case "app": return `app · ${hop.pod}`;
    default: return `${hop.kind} · ${hop.pod}`;
  }
}

// hasFlag reports whether an access log's response flags ("DI,UF" or "-") include flag.
const hasFlag = (flags, flag) => String(flags || "").split(",").includes(flag);

// attributeFaults marks each outbound sidecar hop whose fault filter acted on the request:
// hop.fault = {delay, abort, delayMs, destinationMs}. The delay is the sidecar's own time
// for the request less the destination sidecar's (the next inbound hop), read from their
// access logs; null when either is unknown.
function attributeFaults(hops) {
  hops.forEach((hop, i) => {
    if (hop.kind !== "proxy" || hop.direction !== "outbound") return;
    const stat = (suffix) => Object.keys(hop.stats || {}).some((k) => k.endsWith(suffix));
    const delay = hasFlag(hop.responseFlags, "DI") || stat(".fault.delays_injected");
    const abort = hasFlag(hop.responseFlags, "FI") || stat(".fault.aborts_injected");
    if (!delay && !abort) return;
    const inbound = hops.slice(i + 1).find((x) => x.kind === "proxy" && x.direction === "inbound");
    const dest = inbound && typeof inbound.durationMs === "number" ? inbound.durationMs : null;
    const own = typeof hop.durationMs === "number" ? hop.durationMs : null;
    hop.fault = { delay, abort, delayMs: delay && own !== null && dest !== null ? Math.max(0, own - dest) : null, destinationMs: dest };
  });
}

// renderTrace draws a TraceResult (web.TraceResult) as a summary and an ordered path.
function renderTrace(res) {
  attributeFaults(res.hops || []);
  const faulty = (res.hops || []).find((x) => x.fault && x.fault.delay && x.fault.delayMs !== null);
  const ms = typeof res.durationMs === "number" ? res.durationMs.toFixed(1) + " ms" +
    (faulty ? ` (≈${faulty.fault.delayMs} ms of it a fault delay injected by ${faulty.pod}'s sidecar, ${faulty.fault.destinationMs} ms at the destination)` : "") : "";
  const summary = h("p", { class: "trace-summary" }, h("b", {}, res.pod), " → ", h("code", {}, res.url),
    res.address ? [" via ", h("code", {}, res.address)] : "",
    " · ", h("span", { class: res.status >= 200 && res.status < 400 ? "ok" : "bad" }, res.status ? "status " + res.status : "no answer"),
    ms ? " · " + ms : "", res.requestId ? [" · request id ", h("code", {}, res.requestId)] : "");
  const path = h("ol", { class: "trace", id: "trace-hops" }, (res.hops || []).map((hop, i) => h("li", { class: "hop hop-" + hop.kind, "data-kind": hop.kind, "data-hop": i },
    h("div", { class: "hop-title" }, traceHopTitle(hop)),
    h("table", { class: "grid kv" }, h("tbody", {}, traceRows(hop))))));
  return h("div", { class: "trace-view" }, summary, res.error ? h("p", { class: "error" }, res.error) : "", path);
}

// traceInto traces one request from pod to target and draws it in the element out.
async function traceInto(pod, target, out, msg) {
  msg.textContent = "tracing…";
  out.replaceChildren();
  out.dataset.pod = pod;
  const r = await api("POST", "/v1/trace", { pod, target });
  if (!r.ok) {
    msg.textContent = r.status === 404 && !(r.data && r.data.error) ? "this lab has no trace route" : "error: " + (r.data && r.data.error ? r.data.error : r.data);
    return;
  }
  msg.textContent = "";
  out.replaceChildren(renderTrace(r.data));
}

window.addEventListener("DOMContentLoaded", () => {
  $("trace-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    traceInto(state.pod, $("trace-target").value, $("trace-result"), $("trace-msg"));
  });
  $("traffic-trace").addEventListener("click", () => traceInto($("traffic-pod").value, $("traffic-url").value, $("traffic-result"), $("traffic-msg")));
});
