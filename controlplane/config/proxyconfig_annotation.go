package config

import (
	"path"
	"strconv"

	"sigs.k8s.io/yaml"
)

// proxyConfigAnnotation is Istio's per-pod ProxyConfig override (proxy.istio.io/config),
// which pilot-agent reads at its start.
const proxyConfigAnnotation = "proxy.istio.io/config"

// The proxyMetadata keys of Istio's secure metrics (the secure-metrics task's patches):
// pilot-agent then serves Envoy's stats and the merged metrics over mTLS on those ports,
// and METRICS_LOCALHOST_ACCESS_ONLY keeps 15090 and the status port's metrics to the pod.
const (
	secureMetricsPortMetadata       = "ENVOY_SECURE_METRICS_PORT"
	secureMergedMetricsPortMetadata = "ENVOY_SECURE_MERGED_METRICS_PORT"
	metricsLocalhostOnlyMetadata    = "METRICS_LOCALHOST_ACCESS_ONLY"
)

// SecurePortAnnotation is the pod annotation Istio's injector sets to
// ENVOY_SECURE_MERGED_METRICS_PORT (unless the pod has it), by which the secure-metrics
// sample's Prometheus finds the port.
const SecurePortAnnotation = "prometheus.istio.io/secure-port"

// secureMetrics reads the secure metrics keys of a proxyMetadata as pilot-agent reads its
// environment: a port, 0 or unset for none; localhost-only when "true". A port that is
// not one is reported under field.
func secureMetrics(pm map[string]string, field string, p problems) (metrics, merged uint16, localhostOnly bool) {
	port := func(k string) uint16 {
		v, ok := pm[k]
		if !ok || v == "" {
			return 0
		}
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			p.addf(field+"."+k, "%q is not a port (0 for none, or 1-65535)", v)
			return 0
		}
		return uint16(n)
	}
	return port(secureMetricsPortMetadata), port(secureMergedMetricsPortMetadata), pm[metricsLocalhostOnlyMetadata] == "true"
}

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

// checkProxyConfigAnnotation refuses, in a pod template's annotations, an OUTPUT_CERTS
// that is not an absolute path and a secure metrics port that is not one. The other fields of the annotation are
// left as they were (the samples' holdApplicationUntilProxyStarts; INBOUND_CAPTURE_PORTS,
// which becomes the istio-proxy container's environment while istio-init captures the
// ports of its own -b flag, "*": docs/ARCHITECTURE.md, "Secure metrics").
func checkProxyConfigAnnotation(annotations map[string]string, field string, p problems) {
	pm := proxyMetadata(annotations)
	if d, ok := pm[outputCertsMetadata]; ok && d != "" && !path.IsAbs(d) {
		p.addf(field+"["+proxyConfigAnnotation+"].proxyMetadata."+outputCertsMetadata, "%q is not an absolute path (the istio-proxy container's directory the agent writes key.pem, cert-chain.pem and root-cert.pem to)", d)
	}
	secureMetrics(pm, field+"["+proxyConfigAnnotation+"].proxyMetadata", p)
	checkProxyConfigTracing(annotations, field, p) // proxyconfig_tracing.go
}
