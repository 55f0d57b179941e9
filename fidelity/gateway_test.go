package fidelity

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"istio.io/istio/pilot/test/xds"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestGatewayTelemetryFidelity holds the telemetry filters meshlab's generator gives a
// gateway (istio.stats, peer_metadata) to istiod's for the gateway's router node, with
// Istio's installed default metrics provider (defaultProviders.metrics: prometheus) and
// the scenario's Telemetries: every difference whose path names istio.stats or
// istio.metadata_exchange fails the test. The rest of a gateway's output is not held to
// istiod here (the sidecar ratchet measures sidecars only).
func TestGatewayTelemetryFidelity(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "gateway", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no gateway scenario (%v)", err)
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
			var gws []*model.Pod
			for _, p := range m.Pods {
				if p.Router && !p.Waypoint {
					gws = append(gws, p)
				}
			}
			if len(gws) == 0 {
				t.Fatalf("%s has no gateway pod", path)
			}
			o, err := startGatewayOracle(t, m)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range gws {
				istiod, err := collectIstiodNode(context.Background(), o.addr, routerNode(t, p))
				if err != nil {
					t.Fatalf("collect istiod's config of %s: %v", p.Name, err)
				}
				ours, err := meshlabResources(m, p)
				if err != nil {
					t.Fatal(err)
				}
				var checked int
				for _, d := range diffResources(istiod, ours) {
					s := d.String()
					if !strings.HasPrefix(s, "LDS ") {
						continue
					}
					checked++
					t.Logf("not held: %s", s)
					if strings.Contains(s, "istio.stats") || strings.Contains(s, "istio.metadata_exchange") {
						t.Errorf("gateway %s: %s", p.Name, s)
					}
				}
				t.Logf("gateway %s: %d listener differences outside the telemetry filters, not held here", p.Name, checked)
				if n := countStats(istiod); n == 0 {
					t.Errorf("istiod sent gateway %s no istio.stats: the oracle's mesh config lost its metrics provider", p.Name)
				}
			}
		})
	}
}

// startGatewayOracle starts istiod over m's Kubernetes objects and Istio config, the
// Gateways and Telemetries among them, with Istio's installed default metrics provider.
func startGatewayOracle(t *testing.T, m *model.Model) (*oracle, error) {
	t.Helper()
	objs, err := kubeObjects(m)
	if err != nil {
		return nil, fmt.Errorf("convert kubernetes objects: %w", err)
	}
	docs, err := istioDocs(m, append(slices.Clone(oracleKinds), "Gateway", "Telemetry")...)
	if err != nil {
		return nil, fmt.Errorf("convert istio objects: %w", err)
	}
	cfgs, err := joinYAML(docs)
	if err != nil {
		return nil, err
	}
	fake := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: objs,
		ConfigString:           cfgs,
		MeshConfig:             waypointMeshConfig(m.Mesh),
		ListenerBuilder:        listenLocal,
	})
	return &oracle{fake: fake, addr: fake.Listener.Addr().String()}, nil
}

// routerNode is the xDS node a gateway's pilot-agent announces:
// router~<ip>~<pod>.<ns>~<ns>.svc.cluster.local, no interception.
func routerNode(t *testing.T, p *model.Pod) *corev3.Node {
	t.Helper()
	meta := nodeMetadata(p)
	delete(meta, "INTERCEPTION_MODE")
	s, err := structpb.NewStruct(meta)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{
		Id:       fmt.Sprintf("router~%s~%s.%s~%s.svc.cluster.local", p.IP, p.Name, p.Namespace, p.Namespace),
		Cluster:  p.Workload + "." + p.Namespace,
		Metadata: s,
	}
}

func listenLocal() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// countStats counts the istio.stats filters in istiod's listeners.
func countStats(got map[string]map[string]proto.Message) int {
	n := 0
	for _, l := range got[listenerType] {
		b, err := protojson.Marshal(l)
		if err == nil {
			n += strings.Count(string(b), `"istio.stats"`)
		}
	}
	return n
}
