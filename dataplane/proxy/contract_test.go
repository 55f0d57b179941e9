package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
	"github.com/meshlab/meshlab/internal/testutil"
)

// The files under testdata/contract are copies of what the other side of each contract
// produces (controlplane/xds goldens, the agent's bootstrap golden). The proxy must accept
// them unchanged; when a producer changes its output, refresh the copy here and this test
// says whether the proxy still takes it.

func TestAcceptsTheAgentBootstrap(t *testing.T) {
	// With defaultConfig.tracing.zipkin the bootstrap's tracer is the zipkin cluster's.
	opts, err := ParseArgs([]string{"--mode", "validate", "-c", filepath.Join("testdata", "contract", "agent-bootstrap-zipkin.json")})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(opts, testutil.Logger(t), nil)
	if err != nil {
		t.Fatalf("the agent's bootstrap with a zipkin tracer is refused: %v", err)
	}
	if s.bootTracer == nil || s.bootTracer.Cluster != "zipkin" {
		t.Errorf("bootstrap tracer %+v, want Zipkin to the zipkin cluster", s.bootTracer)
	}
	opts, err = ParseArgs([]string{"--mode", "validate", "-c", filepath.Join("testdata", "contract", "agent-bootstrap.json")})
	if err != nil {
		t.Fatal(err)
	}
	s, err = New(opts, testutil.Logger(t), nil)
	if err != nil {
		t.Fatalf("the agent's bootstrap is refused: %v", err)
	}
	// Istio's bootstrap leaves its static listeners unnamed; Envoy names each with a UUID,
	// and two unnamed listeners must not collide.
	seen := map[string]bool{}
	for _, l := range s.staticListeners {
		if l.Name == "" || seen[l.Name] {
			t.Errorf("static listener name %q is empty or duplicated", l.Name)
		}
		seen[l.Name] = true
	}
	if len(seen) < 2 {
		t.Errorf("want the bootstrap's two static listeners, got %d", len(seen))
	}
}

func TestAcceptsTheControlPlaneResources(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "contract", "xds-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no contract files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string][]json.RawMessage
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			srv := newUnstartedForApply(t)
			// Apply in Envoy's order, as ADS delivers them.
			for _, step := range []struct {
				key, typeURL string
				newMsg       func() protoMessage
			}{
				{"clusters", xdsclient.ClusterType, func() protoMessage { return &clusterv3.Cluster{} }},
				{"endpoints", xdsclient.EndpointType, func() protoMessage { return &endpointv3.ClusterLoadAssignment{} }},
				{"listeners", xdsclient.ListenerType, func() protoMessage { return &listenerv3.Listener{} }},
				{"routes", xdsclient.RouteType, func() protoMessage { return &routev3.RouteConfiguration{} }},
			} {
				var anys []*anypb.Any
				for _, raw := range doc[step.key] {
					m := step.newMsg()
					if err := protojson.Unmarshal(raw, m); err != nil {
						t.Fatalf("%s: %v", step.key, err)
					}
					// Capture listeners would bind 0.0.0.0:15001/15006; tests bind 127.0.0.1:0.
					if l, ok := m.(*listenerv3.Listener); ok && (l.GetBindToPort() == nil || l.GetBindToPort().GetValue()) {
						l.Address = socketAddr("127.0.0.1", 0)
					}
					a, err := anypb.New(m)
					if err != nil {
						t.Fatal(err)
					}
					anys = append(anys, a)
				}
				if err := srv.Apply(step.typeURL, "v1", anys); err != nil {
					t.Errorf("%s refused: %v", step.key, err)
				}
			}
		})
	}
}
