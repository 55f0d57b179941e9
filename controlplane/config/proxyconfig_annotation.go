package config

import (
	"path"

	"sigs.k8s.io/yaml"
)

// proxyConfigAnnotation is Istio's per-pod ProxyConfig override (proxy.istio.io/config),
// which pilot-agent reads at its start.
const proxyConfigAnnotation = "proxy.istio.io/config"

// secureMetricsMetadata are the proxyMetadata keys of Istio's secure metrics (the
// secure-metrics task's patches): pilot-agent then serves Envoy's and the merged metrics
// over mTLS on those ports, and METRICS_LOCALHOST_ACCESS_ONLY keeps 15090/15020 to the
// pod. meshlab's agent serves neither listener, so a pod template asking for them is
// refused by name rather than run without them.
var secureMetricsMetadata = []string{"ENVOY_SECURE_METRICS_PORT", "ENVOY_SECURE_MERGED_METRICS_PORT", "METRICS_LOCALHOST_ACCESS_ONLY"}

// outputCertsMetadata is the proxyMetadata key of pilot-agent's OUTPUT_CERTS: the
// directory of the istio-proxy container it writes the workload's key and certificates
// to (model.SidecarSpec.OutputCerts).
const outputCertsMetadata = "OUTPUT_CERTS"

// proxyMetadata returns the proxyMetadata of a pod template's proxy.istio.io/config
// annotation (nil when it has none, or is not YAML: Istio's injector judges that).
func proxyMetadata(annotations map[string]string) map[string]string {
	v, ok := annotations[proxyConfigAnnotation]
	if !ok {
		return nil
	}
	var pc struct {
		ProxyMetadata map[string]string `json:"proxyMetadata"`
	}
	if err := yaml.Unmarshal([]byte(v), &pc); err != nil {
		return nil
	}
	return pc.ProxyMetadata
}

// outputCerts returns the clean OUTPUT_CERTS directory of a pod template's
// proxyMetadata, "" when unset or not absolute (checkProxyConfigAnnotation refuses it).
func outputCerts(annotations map[string]string) string {
	d := proxyMetadata(annotations)[outputCertsMetadata]
	if !path.IsAbs(d) {
		return ""
	}
	return path.Clean(d)
}

// checkProxyConfigAnnotation refuses, in a pod template's annotations, the
// proxy.istio.io/config proxyMetadata keys meshlab's agent cannot honour, and an
// OUTPUT_CERTS that is not an absolute path. The other fields of the annotation are
// left as they were (the samples' holdApplicationUntilProxyStarts; INBOUND_CAPTURE_PORTS,
// which becomes the istio-proxy container's environment while istio-init captures the
// ports of its own -b flag, "*": docs/ARCHITECTURE.md, "Secure metrics").
func checkProxyConfigAnnotation(annotations map[string]string, field string, p problems) {
	pm := proxyMetadata(annotations)
	if d, ok := pm[outputCertsMetadata]; ok && d != "" && !path.IsAbs(d) {
		p.addf(field+"["+proxyConfigAnnotation+"].proxyMetadata."+outputCertsMetadata, "%q is not an absolute path (the istio-proxy container's directory the agent writes key.pem, cert-chain.pem and root-cert.pem to)", d)
	}
	for _, k := range secureMetricsMetadata {
		if _, set := pm[k]; set {
			p.addf(field+"["+proxyConfigAnnotation+"].proxyMetadata."+k, "meshlab's sidecar serves no secure metrics (no mTLS metrics listener on ENVOY_SECURE_METRICS_PORT or ENVOY_SECURE_MERGED_METRICS_PORT, no METRICS_LOCALHOST_ACCESS_ONLY): "+
				"remove it; the proxy's metrics are on 15090 (/stats/prometheus) and the merged ones on 15020, in plain text, as Istio's without it")
			return
		}
	}
}
