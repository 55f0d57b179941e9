package config

import "sigs.k8s.io/yaml"

// proxyConfigAnnotation is Istio's per-pod ProxyConfig override (proxy.istio.io/config),
// which pilot-agent reads at its start.
const proxyConfigAnnotation = "proxy.istio.io/config"

// secureMetricsMetadata are the proxyMetadata keys of Istio's secure metrics (the
// secure-metrics task's patches): pilot-agent then serves Envoy's and the merged metrics
// over mTLS on those ports, and METRICS_LOCALHOST_ACCESS_ONLY keeps 15090/15020 to the
// pod. meshlab's agent serves neither listener, so a pod template asking for them is
// refused by name rather than run without them.
var secureMetricsMetadata = []string{"ENVOY_SECURE_METRICS_PORT", "ENVOY_SECURE_MERGED_METRICS_PORT", "METRICS_LOCALHOST_ACCESS_ONLY"}

// checkProxyConfigAnnotation refuses, in a pod template's annotations, the
// proxy.istio.io/config proxyMetadata keys meshlab's agent cannot honour. The other
// fields of the annotation are left as they were (the samples' holdApplicationUntilProxyStarts,
// OUTPUT_CERTS).
func checkProxyConfigAnnotation(annotations map[string]string, field string, p problems) {
	v, ok := annotations[proxyConfigAnnotation]
	if !ok {
		return
	}
	var pc struct {
		ProxyMetadata map[string]string `json:"proxyMetadata"`
	}
	if err := yaml.Unmarshal([]byte(v), &pc); err != nil {
		return // read as Istio's injector reads it: not ours to judge here
	}
	for _, k := range secureMetricsMetadata {
		if _, set := pc.ProxyMetadata[k]; set {
			p.addf(field+"["+proxyConfigAnnotation+"].proxyMetadata."+k, "meshlab's sidecar serves no secure metrics (no mTLS metrics listener on ENVOY_SECURE_METRICS_PORT or ENVOY_SECURE_MERGED_METRICS_PORT, no METRICS_LOCALHOST_ACCESS_ONLY): "+
				"remove it; the proxy's metrics are on 15090 (/stats/prometheus) and the merged ones on 15020, in plain text, as Istio's without it")
			return
		}
	}
}
