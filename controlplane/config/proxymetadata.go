package config

import (
	"maps"
	"path"
	"strconv"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// meshProxyMetadataPaths is MeshConfig's defaultConfig.proxyMetadata: the environment
// every proxy's agent starts with (istioctl install's meshConfig, the secure-metrics
// page's istio-secure-metrics.yaml). A lab honours the keys proxyconfig_annotation.go
// reads (OUTPUT_CERTS and the secure metrics ones); the others are kept as written.
func meshProxyMetadataPaths() string { return "defaultConfig.proxyMetadata" }

// validateMeshProxyMetadata refuses, in defaultConfig.proxyMetadata, an OUTPUT_CERTS that
// is not an absolute path and a secure metrics port that is not one.
func validateMeshProxyMetadata(mc *meshv1alpha1.MeshConfig, p problems) {
	pm := mc.GetDefaultConfig().GetProxyMetadata()
	if d, ok := pm[outputCertsMetadata]; ok && d != "" && !path.IsAbs(d) {
		p.addf("spec.defaultConfig.proxyMetadata."+outputCertsMetadata, "%q is not an absolute path (the istio-proxy container's directory the agent writes key.pem, cert-chain.pem and root-cert.pem to)", d)
	}
	secureMetrics(pm, "spec.defaultConfig.proxyMetadata", p)
}

// meshProxyMetadata returns the objects' MeshConfig defaultConfig.proxyMetadata (nil
// without one).
func meshProxyMetadata(objs []*Object) map[string]string {
	for _, o := range objs {
		if o.MeshConfig != nil {
			return o.MeshConfig.GetDefaultConfig().GetProxyMetadata()
		}
	}
	return nil
}

// mergeProxyMetadata returns the proxyMetadata a proxy runs with: the mesh's default,
// then each later map over it key by key (the pod's proxy.istio.io/config, then the
// istio-proxy container's own environment), as Istio's MergeProxyConfig merges the
// annotation's proxyMetadata into defaultConfig's rather than replacing it.
func mergeProxyMetadata(layers ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		maps.Copy(out, l)
	}
	return out
}

// applyProxyMetadata sets what pilot-agent reads of its proxyMetadata on pod p's proxy:
// OUTPUT_CERTS, the secure metrics listeners and METRICS_LOCALHOST_ACCESS_ONLY. With a
// secure merged metrics port it sets prometheus.istio.io/secure-port unless the pod has
// it, as Istio's injector does (applySecurePrometheusAnnotation), by which the
// secure-metrics sample's Prometheus finds the port. Bad values were refused where they
// were written (checkProxyConfigAnnotation, validateMeshProxyMetadata); here they count
// as unset.
func applyProxyMetadata(p *model.Pod, pm map[string]string) {
	sc := &p.Sidecar
	sc.OutputCerts = ""
	if d := pm[outputCertsMetadata]; path.IsAbs(d) {
		sc.OutputCerts = path.Clean(d)
	}
	sc.SecureMetricsPort, sc.SecureMergedMetricsPort, sc.MetricsLocalhostOnly = secureMetrics(pm, "", problems{list: new(ErrorList)})
	if sc.SecureMergedMetricsPort != 0 && p.Annotations[SecurePortAnnotation] == "" {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[SecurePortAnnotation] = strconv.Itoa(int(sc.SecureMergedMetricsPort))
	}
}
