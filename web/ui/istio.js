// meshlab dashboard: a pod's Istio standard metrics on its page, read from the lab's
// /metrics (every proxy's /stats/prometheus with a pod label): istio_requests_total by
// reporter, peer and response code, and p50/p90 of istio_request_duration_milliseconds,
// computed from the histogram's buckets as Prometheus' histogram_quantile does.
"use strict";

const ISTIO_REFRESH_MS = 5000;
const istioState = { pod: "", at: 0, busy: false };

// parsePromLine reads one sample line of Prometheus' text format.
function parsePromLine(line) {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
  if (!m) return null;
  const labels = {};
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  let l;
  while ((l = re.exec(m[2] || ""))) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
  return { name: m[1], labels, value: Number(m[3]) };
}

// histogramQuantile is Prometheus' histogram_quantile over cumulative buckets
// [{le, count}] sorted by le: linear interpolation inside the bucket that holds rank q.
function histogramQuantile(q, buckets) {
  if (!buckets.length) return NaN;
  const total = buckets[buckets.length - 1].count;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe; // the +Inf bucket: the highest finite bound
      return prevLe + (b.le - prevLe) * ((rank - prevCount) / Math.max(1e-9, b.count - prevCount));
    }
    prevLe = b.le; prevCount = b.count;
  }
  return prevLe;
}

// istioMetricsOf picks the pod's istio_* samples out of the lab's metrics text.
function istioMetricsOf(text, pod) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("istio_")) continue;
    const s = parsePromLine(line);
    if (s && s.labels.pod === pod) out.push(s);
  }
  return out;
}

// peerOf names the other side of a series as the reporter saw it: the destination
// service and workload, or the source workload, else (no peer metadata) its identity.
function peerOf(l) {
  const known = (v) => v && v !== "unknown";
  if (l.reporter === "source") return `→ ${l.destination_service || "unknown"}` + (known(l.destination_workload) ? ` (${l.destination_workload})` : "");
  if (known(l.source_workload)) return `← ${l.source_workload}.${l.source_workload_namespace || "unknown"}`;
  if (known(l.source_principal)) return `← ${l.source_principal.replace(/^spiffe:\/\//, "")}`;
  return `← unknown.${l.source_workload_namespace || "unknown"}`;
}

function drawIstioMetrics(samples, err) {
  const reqBody = $("pod-istio-requests").tBodies[0], durBody = $("pod-istio-durations").tBodies[0];
  if (err) {
    $("pod-istio-msg").textContent = err;
    reqBody.replaceChildren(); durBody.replaceChildren();
    return;
  }
  const requests = samples.filter((s) => s.name === "istio_requests_total" && s.value > 0)
    .sort((a, b) => (a.labels.reporter + peerOf(a.labels) + a.labels.response_code).localeCompare(b.labels.reporter + peerOf(b.labels) + b.labels.response_code));
  reqBody.replaceChildren(...requests.map((s) => h("tr", { class: "istio-request", "data-reporter": s.labels.reporter, "data-code": s.labels.response_code },
    h("td", {}, s.labels.reporter), h("td", { class: "mono" }, peerOf(s.labels)),
    h("td", { class: "num " + (Number(s.labels.response_code) >= 500 ? "bad" : "") }, s.labels.response_code),
    h("td", { class: "mono" }, s.labels.response_flags || "-"), h("td", {}, s.labels.connection_security_policy || "-"),
    h("td", { class: "num" }, String(s.value)))));
  // Durations: one histogram per reporter and peer, over every code.
  const hist = {};
  for (const s of samples) {
    if (s.name !== "istio_request_duration_milliseconds_bucket") continue;
    const k = s.labels.reporter + "|" + peerOf(s.labels);
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    const hh = (hist[k] = hist[k] || { reporter: s.labels.reporter, peer: peerOf(s.labels), le: {} });
    hh.le[le] = (hh.le[le] || 0) + s.value;
  }
  const rows = Object.values(hist).map((x) => {
    const buckets = Object.entries(x.le).map(([le, count]) => ({ le: Number(le), count })).sort((a, b) => a.le - b.le);
    return { ...x, n: buckets.length ? buckets[buckets.length - 1].count : 0, p50: histogramQuantile(0.5, buckets), p90: histogramQuantile(0.9, buckets) };
  }).filter((x) => x.n > 0).sort((a, b) => (a.reporter + a.peer).localeCompare(b.reporter + b.peer));
  const ms = (v) => (Number.isFinite(v) ? v.toFixed(v < 10 ? 1 : 0) + " ms" : "-");
  durBody.replaceChildren(...rows.map((x) => h("tr", { class: "istio-duration" },
    h("td", {}, x.reporter), h("td", { class: "mono" }, x.peer), h("td", { class: "num" }, String(x.n)),
    h("td", { class: "num" }, ms(x.p50)), h("td", { class: "num" }, ms(x.p90)))));
  const names = [...new Set(samples.map((s) => s.name.replace(/_(bucket|sum|count)$/, "")))].sort();
  $("pod-istio-msg").textContent = samples.length
    ? `${names.join(", ")} · ${requests.reduce((n, s) => n + s.value, 0)} requests reported`
    : "no istio_* metrics from this pod yet (no request through its proxy, or no proxy)";
}

// loadIstioMetrics refreshes the pod's Istio metrics, at most every ISTIO_REFRESH_MS
// (the lab's /metrics asks every proxy).
async function loadIstioMetrics(force) {
  const pod = state.pod;
  if (!pod || istioState.busy || (!force && istioState.pod === pod && Date.now() - istioState.at < ISTIO_REFRESH_MS)) return;
  istioState.busy = true;
  try {
    const r = await api("GET", "/metrics");
    if (pod !== state.pod) return;
    istioState.pod = pod; istioState.at = Date.now();
    if (!r.ok) drawIstioMetrics([], "error reading /metrics: " + (r.data.error || r.data));
    else drawIstioMetrics(istioMetricsOf(typeof r.data === "string" ? r.data : "", pod), "");
  } finally {
    istioState.busy = false;
  }
}
