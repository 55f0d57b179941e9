package xds

import (
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tracecfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// tracingModel is the hello model with Istio's zipkin addon service, a zipkin
// extension provider and the zipkin page's mesh-default Telemetry.
func tracingModel(sampling *float64) *model.Model {
	m := helloModel()
	m.Services = append(m.Services, &model.Service{
		Name: "zipkin", Namespace: "istio-system", VIP: netip.MustParseAddr("10.96.0.40"),
		Ports:    []model.ServicePort{{Name: "http-query", Port: 9411, TargetPort: 9411, Protocol: model.ProtocolHTTP}},
		Selector: map[string]string{"app": "zipkin"},
	})
	m.Mesh.Tracing.Providers = []model.ZipkinProvider{{Name: "zipkin", Service: "zipkin.istio-system.svc.cluster.local", Port: 9411}}
	tr := &telemetry.Tracing{Providers: []*telemetry.ProviderRef{{Name: "zipkin"}}}
	if sampling != nil {
		tr.RandomSamplingPercentage = wrapperspb.Double(*sampling)
	}
	m.Istio.Telemetries = []*model.IstioConfig[*telemetry.Telemetry]{{Name: "mesh-default", Namespace: "istio-system", Spec: &telemetry.Telemetry{Tracing: []*telemetry.Tracing{tr}}}}
	return m
}

// listenerHCMs are the HCMs of the generated listeners, by "listener/chain".
func listenerHCMs(t *testing.T, res map[resource.Type][]types.Resource) map[string]*hcm.HttpConnectionManager {
	t.Helper()
	out := map[string]*hcm.HttpConnectionManager{}
	for _, r := range res[resource.ListenerType] {
		l := r.(*listener.Listener)
		chains := l.GetFilterChains()
		if l.GetDefaultFilterChain() != nil {
			chains = append(chains[:len(chains):len(chains)], l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				if f.GetName() != wellknown.HTTPConnectionManager {
					continue
				}
				h := &hcm.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
					t.Fatal(err)
				}
				out[l.GetName()+"/"+fc.GetName()] = h
			}
		}
	}
	return out
}

// hcmOf is the HCM of listener name's first chain that has one.
func hcmOf(t *testing.T, hcms map[string]*hcm.HttpConnectionManager, name string) *hcm.HttpConnectionManager {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(hcms)) {
		if strings.HasPrefix(k, name+"/") {
			return hcms[k]
		}
	}
	t.Fatalf("no HCM on listener %s", name)
	return nil
}

// The zipkin page's Telemetry gives every HCM of a sidecar istiod's tracing block:
// the zipkin provider to the collector service's outbound cluster, sampling from the
// Telemetry (else istiod's 1 %), Istio's tags. Golden: the block of the outbound HCM.
func TestTelemetryTracingZipkin(t *testing.T) {
	t.Parallel()
	hundred := 100.0
	res := generate(t, tracingModel(&hundred), "frontend-v1")
	h := hcmOf(t, listenerHCMs(t, res), "0.0.0.0_8080")
	tr := h.GetTracing()
	if tr.GetProvider().GetName() != zipkinTracer || tr.GetRandomSampling().GetValue() != 100 || tr.GetSpawnUpstreamSpan() != nil {
		t.Fatalf("tracing %v, want zipkin at 100 %%, no upstream span on a sidecar", tr)
	}
	var zc tracecfg.ZipkinConfig
	if err := tr.GetProvider().GetTypedConfig().UnmarshalTo(&zc); err != nil {
		t.Fatal(err)
	}
	if c := zc.GetCollectorService().GetHttpUri().GetCluster(); c != "outbound|9411||zipkin.istio-system.svc.cluster.local" {
		t.Errorf("collector cluster %q", c)
	}
	b, err := protojson.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if b, err = json.MarshalIndent(v, "", "  "); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "tracing-zipkin", append(b, '\n'))
	// The whole config, which dataplane/proxy's contract test applies
	// (testdata/contract/xds-tracing-zipkin-frontend-v1.json is a copy).
	testutil.Golden(t, "tracing-zipkin-frontend-v1", dumpJSON(t, res))
	for name, h := range listenerHCMs(t, res) {
		if h.GetTracing() == nil {
			t.Errorf("HCM of %s has no tracing block", name)
		}
	}

	if tr := hcmOf(t, listenerHCMs(t, generate(t, tracingModel(nil), "frontend-v1")), "0.0.0.0_8080").GetTracing(); tr.GetRandomSampling().GetValue() != model.DefaultTraceSampling {
		t.Errorf("without randomSamplingPercentage: random sampling %v, want istiod's %v", tr.GetRandomSampling(), model.DefaultTraceSampling)
	}
	noCollector := tracingModel(nil)
	noCollector.Services = noCollector.Services[:len(noCollector.Services)-1]
	if tr := hcmOf(t, listenerHCMs(t, generate(t, noCollector, "frontend-v1")), "0.0.0.0_8080").GetTracing(); tr != nil {
		t.Errorf("collector service missing: tracing %v, want none (istiod's cluster lookup fails)", tr)
	}
	disabled := tracingModel(nil)
	disabled.Istio.Telemetries[0].Spec.Tracing[0].DisableSpanReporting = wrapperspb.Bool(true)
	if tr := hcmOf(t, listenerHCMs(t, generate(t, disabled, "frontend-v1")), "0.0.0.0_8080").GetTracing(); tr != nil {
		t.Errorf("disableSpanReporting: tracing %v, want none", tr)
	}
}
