package xds

import (
	"encoding/json"
	"net/netip"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// proxyConfigTracingScenario: the mesh samples 10 % with a custom tag; the annotated
// Deployment's proxy.istio.io/config names its own tracing (sampling, a header tag,
// maxPathTagLength, a zipkin address on the node).
const proxyConfigTracingScenario = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata: {name: mesh}
spec:
  defaultConfig:
    tracing:
      sampling: 10
      customTags:
        mesh: {literal: {value: m}}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: default}
spec:
  selector: {app: plain}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: plain, namespace: default}
spec:
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec: {containers: [{name: app, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: annotated, namespace: default}
spec:
  selector: {matchLabels: {app: annotated}}
  template:
    metadata:
      labels: {app: annotated}
      annotations:
        proxy.istio.io/config: |
          tracing:
            sampling: 50
            maxPathTagLength: 99
            zipkin: {address: "$(HOST_IP):9411"}
            customTags:
              user: {header: {name: x-user, defaultValue: none}}
    spec: {containers: [{name: app, image: meshlab/demoapp, ports: [{containerPort: 8080}]}]}
`

func proxyConfigTracingModel(t *testing.T) *model.Model {
	t.Helper()
	s, err := config.Load("proxyconfig-tracing.yaml", []byte(proxyConfigTracingScenario))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func podOfApp(t *testing.T, m *model.Model, app string) *model.Pod {
	t.Helper()
	for _, p := range m.Pods {
		if p.Labels["app"] == app {
			return p
		}
	}
	t.Fatalf("no pod of app %s", app)
	return nil
}

// A pod's proxy.istio.io/config tracing is its proxy's config, as istiod reads it from
// the node's metadata (ProxyConfigOrDefault): the legacy block of every HCM of the
// annotated pod has its sampling, tags and path length, and none of the mesh's (the
// annotation's tracing replaces defaultConfig.tracing whole); the other pod keeps the
// mesh's. On the Telemetry path a Telemetry without randomSamplingPercentage falls back
// to the pod's sampling. Golden: tracing-proxyconfig.golden (the annotated pod's block).
func TestProxyConfigAnnotationTracing(t *testing.T) {
	t.Parallel()
	m := proxyConfigTracingModel(t)
	annotated, plain := podOfApp(t, m, "annotated"), podOfApp(t, m, "plain")
	hcms := listenerHCMs(t, generate(t, m, annotated.Name))
	if len(hcms) == 0 {
		t.Fatal("no HCM for the annotated pod")
	}
	var golden []byte
	for name, h := range hcms {
		tr := h.GetTracing()
		tags := map[string]bool{}
		for _, ct := range tr.GetCustomTags() {
			tags[ct.GetTag()] = true
		}
		if tr.GetRandomSampling().GetValue() != 50 || tr.GetMaxPathTagLength().GetValue() != 99 || !tags["user"] || tags["mesh"] || !tags["istio.canonical_service"] {
			t.Errorf("%s: tracing %v, want the annotation's (50 %%, path 99, tag user and Istio's, not the mesh's)", name, tr)
		}
		if golden == nil {
			b, err := protojson.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if golden, err = json.MarshalIndent(v, "", "  "); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.Golden(t, "tracing-proxyconfig", append(golden, '\n'))
	for name, h := range listenerHCMs(t, generate(t, m, plain.Name)) {
		tr := h.GetTracing()
		if tr.GetRandomSampling().GetValue() != 10 || tr.GetMaxPathTagLength() != nil || len(tr.GetCustomTags()) != 10 {
			t.Errorf("%s of the plain pod: tracing %v, want the mesh's (10 %%, Istio's nine tags and mesh)", name, tr)
		}
	}

	// A Telemetry without a sampling percentage: each proxy's own.
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{{Name: "mesh-default", Namespace: "istio-system",
		Spec: &telemetry.Telemetry{Tracing: []*telemetry.Tracing{{CustomTags: map[string]*telemetry.Tracing_CustomTag{
			"t": {Type: &telemetry.Tracing_CustomTag_Literal{Literal: &telemetry.Tracing_Literal{Value: "v"}}},
		}}}}}}
	for pod, want := range map[*model.Pod]float64{annotated: 50, plain: 10} {
		for name, h := range listenerHCMs(t, generate(t, m, pod.Name)) {
			if got := h.GetTracing().GetRandomSampling().GetValue(); got != want {
				t.Errorf("%s of %s under a Telemetry without sampling: %v %%, want the proxy config's %v", name, pod.Name, got, want)
			}
		}
	}
	m.Istio.Telemetries[0].Spec.Tracing[0].RandomSamplingPercentage = wrapperspb.Double(75)
	for name, h := range listenerHCMs(t, generate(t, m, annotated.Name)) {
		if got := h.GetTracing().GetRandomSampling().GetValue(); got != 75 {
			t.Errorf("%s under a Telemetry of 75 %%: %v %%", name, got)
		}
	}
}
