package config

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestMeshProxyMetadataSecureMetrics: the secure-metrics page's istioctl install (its
// installed-state on the MeshConfig): meshConfig.defaultConfig.proxyMetadata reaches every
// proxy, sidecars under their own proxy.istio.io/config key by key, and the ingress
// gateway's k8s.podAnnotations and k8s.env go on its pod, so both get the 15091 and 15092
// listeners as Istio's do.
func TestMeshProxyMetadataSecureMetrics(t *testing.T) {
	t.Parallel()
	const objs = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata:
  name: mesh
  annotations:
    meshlab.dev/installed-state: '{"kind":"IstioOperator","spec":{"components":{"ingressGateways":[{"enabled":true,"name":"istio-ingressgateway","k8s":{"podAnnotations":{"prometheus.istio.io/secure-port":"15092","prometheus.io/path":"/stats/prometheus"}%s}}]}}}'
spec:
  defaultConfig:
    proxyMetadata:
      ENVOY_SECURE_METRICS_PORT: "15091"
      ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
      METRICS_LOCALHOST_ACCESS_ONLY: "true"
---
apiVersion: v1
kind: Namespace
metadata: {name: default, labels: {istio-injection: enabled}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: httpbin}
spec:
  selector: {matchLabels: {app: httpbin}}
  template:
    metadata:
      labels: {app: httpbin}
      annotations:
        proxy.istio.io/config: |
          proxyMetadata:
            ENVOY_SECURE_MERGED_METRICS_PORT: "16092"
    spec: {containers: [{name: httpbin, image: x}]}
`
	build := func(t *testing.T, env string) *model.Model {
		t.Helper()
		sc, err := Load("mesh.yaml", []byte(strings.Replace(objs, "%s", env, 1)))
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		m, err := sc.Build(defaultOpts)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return m
	}
	pod := func(t *testing.T, m *model.Model, workload string) *model.Pod {
		t.Helper()
		for _, p := range m.Pods {
			if p.Workload == workload {
				return p
			}
		}
		t.Fatalf("no pod of %s in %v", workload, m.Pods)
		return nil
	}
	m := build(t, "")
	gw := pod(t, m, model.IngressGatewayName)
	if sc := gw.Sidecar; sc.SecureMetricsPort != 15091 || sc.SecureMergedMetricsPort != 15092 || !sc.MetricsLocalhostOnly {
		t.Errorf("gateway's proxy: secure %d, merged %d, localhost-only %v; want the mesh's 15091, 15092, true", sc.SecureMetricsPort, sc.SecureMergedMetricsPort, sc.MetricsLocalhostOnly)
	}
	if gw.Annotations[SecurePortAnnotation] != "15092" || gw.Annotations["prometheus.io/path"] != "/stats/prometheus" {
		t.Errorf("gateway pod's annotations %v, want the install's podAnnotations", gw.Annotations)
	}
	app := pod(t, m, "httpbin")
	if sc := app.Sidecar; sc.SecureMetricsPort != 15091 || sc.SecureMergedMetricsPort != 16092 || !sc.MetricsLocalhostOnly {
		t.Errorf("httpbin's sidecar: secure %d, merged %d, localhost-only %v; want 15091 and true from the mesh, its own 16092", sc.SecureMetricsPort, sc.SecureMergedMetricsPort, sc.MetricsLocalhostOnly)
	}
	if app.Annotations[SecurePortAnnotation] != "16092" {
		t.Errorf("httpbin's %s = %q, want its merged port 16092", SecurePortAnnotation, app.Annotations[SecurePortAnnotation])
	}
	// The istio-proxy container's env is over the mesh's proxyMetadata, and a changed pod
	// template makes another pod, as a Deployment rolls out.
	m2 := build(t, `,"env":[{"name":"ENVOY_SECURE_METRICS_PORT","value":"17091"}]`)
	gw2 := pod(t, m2, model.IngressGatewayName)
	if gw2.Sidecar.SecureMetricsPort != 17091 || gw2.Sidecar.SecureMergedMetricsPort != 15092 {
		t.Errorf("gateway with env: secure %d, merged %d; want the env's 17091 and the mesh's 15092", gw2.Sidecar.SecureMetricsPort, gw2.Sidecar.SecureMergedMetricsPort)
	}
	if gw2.Name == gw.Name {
		t.Errorf("the gateway pod kept its name %s with a changed template", gw.Name)
	}
}

// TestMeshProxyMetadataRefused: bad values of defaultConfig.proxyMetadata are refused by
// field, and the MeshConfig is not loaded.
func TestMeshProxyMetadataRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ meta, want string }{
		{`ENVOY_SECURE_METRICS_PORT: "https"`, `spec.defaultConfig.proxyMetadata.ENVOY_SECURE_METRICS_PORT: "https" is not a port`},
		{`ENVOY_SECURE_MERGED_METRICS_PORT: "70000"`, `spec.defaultConfig.proxyMetadata.ENVOY_SECURE_MERGED_METRICS_PORT: "70000" is not a port`},
		{`OUTPUT_CERTS: "certs"`, `spec.defaultConfig.proxyMetadata.OUTPUT_CERTS: "certs" is not an absolute path`},
	} {
		_, err := Load("m.yaml", []byte("apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec:\n  defaultConfig:\n    proxyMetadata:\n      "+tc.meta+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.meta, err, tc.want)
		}
	}
}

// TestGatewayInfrastructureSecureMetrics: the secure-metrics page's merge patch of a
// Gateway API Gateway: spec.infrastructure.annotations go on the automated deployment's
// pod (Istio copies them onto its pod template), whose proxy.istio.io/config gives the
// gateway the 15091 and 15092 listeners; a bad port there is refused by field.
func TestGatewayInfrastructureSecureMetrics(t *testing.T) {
	t.Parallel()
	const gw = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: istio-ingressgateway, namespace: istio-system}
spec:
  gatewayClassName: istio
  listeners:
  - {name: http, port: 80, protocol: HTTP}
%s`
	const infra = `  infrastructure:
    annotations:
      proxy.istio.io/config: |
        proxyMetadata:
          ENVOY_SECURE_METRICS_PORT: "%s"
          ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
      prometheus.istio.io/secure-port: "15092"
      prometheus.io/path: "/stats/prometheus"
`
	gatewayPod := func(t *testing.T, yaml string) *model.Pod {
		t.Helper()
		sc, err := Load("gw.yaml", []byte(yaml))
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		m, err := sc.Build(defaultOpts)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		for _, p := range m.Pods {
			if p.Workload == GatewayAPIServiceName("istio-ingressgateway") {
				return p
			}
		}
		t.Fatalf("no pod of the Gateway's deployment")
		return nil
	}
	plain := gatewayPod(t, strings.Replace(gw, "%s", "", 1))
	if plain.Sidecar.SecureMetricsPort != 0 || plain.Annotations[SecurePortAnnotation] != "" {
		t.Errorf("Gateway without infrastructure: secure port %d, annotations %v; want none", plain.Sidecar.SecureMetricsPort, plain.Annotations)
	}
	patched := gatewayPod(t, strings.Replace(gw, "%s", strings.Replace(infra, "%s", "15091", 1), 1))
	if sc := patched.Sidecar; sc.SecureMetricsPort != 15091 || sc.SecureMergedMetricsPort != 15092 {
		t.Errorf("patched Gateway's proxy: secure %d, merged %d; want 15091, 15092", sc.SecureMetricsPort, sc.SecureMergedMetricsPort)
	}
	if patched.Annotations[SecurePortAnnotation] != "15092" || patched.Annotations["prometheus.io/path"] != "/stats/prometheus" || patched.Annotations[proxyConfigAnnotation] == "" {
		t.Errorf("patched Gateway's pod annotations %v, want the infrastructure annotations", patched.Annotations)
	}
	if patched.Name == plain.Name {
		t.Errorf("the Gateway's pod kept its name %s with a changed template", plain.Name)
	}
	_, err := Load("gw.yaml", []byte(strings.Replace(gw, "%s", strings.Replace(infra, "%s", "metrics", 1), 1)))
	if want := `spec.infrastructure.annotations[proxy.istio.io/config].proxyMetadata.ENVOY_SECURE_METRICS_PORT: "metrics" is not a port`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad port in infrastructure annotations: %v, want %q", err, want)
	}
	_, err = Load("gw.yaml", []byte(strings.Replace(gw, "%s", "  infrastructure:\n    labels: {a: b}\n", 1)))
	if want := `spec.infrastructure.labels: is not supported by meshlab's Gateway`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("infrastructure labels: %v, want %q", err, want)
	}
}

// TestInstalledGatewayK8sRefused: a bad secure metrics port or OUTPUT_CERTS in the
// installed-state's gateway k8s settings (a patch of the gateway's Deployment) is
// refused by field, as on a pod template.
func TestInstalledGatewayK8sRefused(t *testing.T) {
	t.Parallel()
	const mesh = "apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata:\n  name: mesh\n  annotations:\n    meshlab.dev/installed-state: '{\"kind\":\"IstioOperator\",\"spec\":{\"components\":{\"ingressGateways\":[{\"enabled\":true,\"name\":\"istio-ingressgateway\",\"k8s\":%s}]}}}'\nspec: {}\n"
	for _, tc := range []struct{ k8s, want string }{
		{`{"env":[{"name":"ENVOY_SECURE_METRICS_PORT","value":"x"}]}`, `metadata.annotations[meshlab.dev/installed-state].spec.components.ingressGateways[0].k8s.env.ENVOY_SECURE_METRICS_PORT: "x" is not a port`},
		{`{"env":[{"name":"OUTPUT_CERTS","value":"certs"}]}`, `k8s.env.OUTPUT_CERTS: "certs" is not an absolute path`},
		{`{"podAnnotations":{"proxy.istio.io/config":"proxyMetadata:\n  ENVOY_SECURE_MERGED_METRICS_PORT: \"99999\"\n"}}`, `k8s.podAnnotations[proxy.istio.io/config].proxyMetadata.ENVOY_SECURE_MERGED_METRICS_PORT: "99999" is not a port`},
	} {
		_, err := Load("mesh.yaml", []byte(strings.Replace(mesh, "%s", tc.k8s, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.k8s, err, tc.want)
		}
	}
}
