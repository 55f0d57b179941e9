package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"

	// Linked for decoding istiod's output only: the proxy refuses what it does not implement.
	_ "github.com/cncf/xds/go/xds/type/matcher/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
)

// istiodWaypoint reads testdata/contract/istiod-waypoint.json (a copy of wgen's
// fidelity/testdata/waypoint/ambient-waypoint.istiod.json), istiod's output for a
// waypoint node (fidelity's ambient-waypoint scenario: "LDS <name>", "CDS <name>", "EDS
// <name>" keys), as Anys by type URL in name order.
func istiodWaypoint(t *testing.T) map[string][]*anypb.Any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "contract", "istiod-waypoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string][]*anypb.Any{}
	for _, k := range keys {
		kind, _, _ := strings.Cut(k, " ")
		var m protoMessage
		var typ string
		switch kind {
		case "LDS":
			m, typ = &listenerv3.Listener{}, xdsclient.ListenerType
		case "CDS":
			m, typ = &clusterv3.Cluster{}, xdsclient.ClusterType
		case "EDS":
			m, typ = &endpointv3.ClusterLoadAssignment{}, xdsclient.EndpointType
		default:
			t.Fatalf("key %q", k)
		}
		if err := protojson.Unmarshal(doc[k], m); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if l, ok := m.(*listenerv3.Listener); ok && l.GetAddress().GetSocketAddress() != nil {
			l.Address = socketAddr("127.0.0.1", 0)
		}
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		out[typ] = append(out[typ], a)
	}
	return out
}

// stillRefused are istiod's waypoint resources the proxy does not implement yet, each
// with the field its refusal names (issue 27). The list only shrinks: a resource that
// starts being accepted, or refused for another reason, fails the test.
var stillRefused = map[string]string{}

// Each of istiod's waypoint resources is accepted, or refused naming the field the
// proxy does not implement (stillRefused), never ignored.
func TestIstiodWaypointResources(t *testing.T) {
	res := istiodWaypoint(t)
	srv := newUnstartedForApply(t)
	kinds := map[string]string{xdsclient.ClusterType: "CDS", xdsclient.EndpointType: "EDS", xdsclient.ListenerType: "LDS"}
	for _, typ := range []string{xdsclient.ClusterType, xdsclient.EndpointType, xdsclient.ListenerType} {
		for _, a := range res[typ] {
			key := kinds[typ] + " " + resourceName(t, a)
			err := srv.Apply(typ, "v1", []*anypb.Any{a})
			want, refused := stillRefused[key]
			switch {
			case err != nil && !refused:
				t.Errorf("%s refused: %v", key, err)
			case err == nil && refused:
				t.Errorf("%s accepted: take it out of stillRefused", key)
			case err != nil && !strings.Contains(err.Error(), want):
				t.Errorf("%s refused for another reason than %q: %v", key, want, err)
			}
		}
	}
}

func resourceName(t *testing.T, a *anypb.Any) string {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	switch r := m.(type) {
	case *listenerv3.Listener:
		return r.GetName()
	case *clusterv3.Cluster:
		return r.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	}
	t.Fatalf("resource %T", m)
	return ""
}
