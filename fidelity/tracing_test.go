package fidelity

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/test/xds"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestTracingFidelity holds the tracing block meshlab's generator gives every HTTP
// connection manager of a sidecar, from the Telemetry API's tracing and the mesh
// config's opentelemetry extension providers, to istiod's for the same pods: every
// listener difference whose path is in an HCM's tracing fails the test. The rest of the
// output is held by the sidecar ratchet elsewhere.
func TestTracingFidelity(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "tracing", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no tracing scenario (%v)", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			sc, err := loadScenario(path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := sc.Build(buildOptions)
			if err != nil {
				t.Fatal(err)
			}
			o, err := startTracingOracle(t, m)
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, p := range m.Pods {
				if p.Router || p.Waypoint || !p.Sidecar.Inject {
					continue
				}
				istiod, err := collectIstiod(context.Background(), o.addr, p)
				if err != nil {
					t.Fatalf("collect istiod's config of %s: %v", p.Name, err)
				}
				ours, err := meshlabResources(m, p)
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(fmt.Sprint(istiod[listenerType]), "envoy.tracers.opentelemetry"); n == 0 {
					t.Errorf("istiod sent %s no opentelemetry tracer: the oracle lost the providers or the Telemetry", p.Name)
				}
				for _, d := range diffResources(istiod, ours) {
					s := d.String()
					if !strings.HasPrefix(s, "LDS ") {
						continue
					}
					if strings.Contains(s, ".tracing") {
						t.Errorf("%s: %s", p.Name, s)
					}
				}
				checked++
			}
			if checked == 0 {
				t.Fatalf("%s has no sidecar pod", path)
			}
		})
	}
}

// startTracingOracle starts istiod over m's Kubernetes objects and Istio config, the
// Telemetries among them, with the lab's mesh config and its opentelemetry providers.
func startTracingOracle(t *testing.T, m *model.Model) (*oracle, error) {
	t.Helper()
	objs, err := kubeObjects(m)
	if err != nil {
		return nil, fmt.Errorf("convert kubernetes objects: %w", err)
	}
	docs, err := istioDocs(m, append(slices.Clone(oracleKinds), "Telemetry")...)
	if err != nil {
		return nil, fmt.Errorf("convert istio objects: %w", err)
	}
	cfgs, err := joinYAML(docs)
	if err != nil {
		return nil, err
	}
	mc := meshConfig(m.Mesh)
	for _, p := range m.Mesh.Tracing.OTelProviders {
		o := &meshconfig.MeshConfig_ExtensionProvider_OpenTelemetryTracingProvider{Service: p.Service, Port: uint32(p.Port), MaxTagLength: p.MaxTagLength}
		if p.EnvironmentDetector {
			o.ResourceDetectors = &meshconfig.MeshConfig_ExtensionProvider_ResourceDetectors{
				Environment: &meshconfig.MeshConfig_ExtensionProvider_ResourceDetectors_EnvironmentResourceDetector{},
			}
		}
		if h := p.HTTP; h != nil {
			o.Http = &meshconfig.MeshConfig_ExtensionProvider_HttpService{Path: h.Path}
			if h.HasTimeout {
				o.Http.Timeout = durationpb.New(h.Timeout)
			}
			for _, kv := range h.Headers {
				o.Http.Headers = append(o.Http.Headers, &meshconfig.MeshConfig_ExtensionProvider_HttpHeader{
					Name: kv[0], HeaderValue: &meshconfig.MeshConfig_ExtensionProvider_HttpHeader_Value{Value: kv[1]},
				})
			}
		}
		mc.ExtensionProviders = append(mc.ExtensionProviders, &meshconfig.MeshConfig_ExtensionProvider{
			Name: p.Name, Provider: &meshconfig.MeshConfig_ExtensionProvider_Opentelemetry{Opentelemetry: o},
		})
	}
	fake := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: objs,
		ConfigString:           cfgs,
		MeshConfig:             mc,
		ListenerBuilder:        func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
	})
	return &oracle{fake: fake, addr: fake.Listener.Addr().String()}, nil
}
