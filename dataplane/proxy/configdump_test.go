package proxy

import (
	"net/netip"
	"regexp"
	"testing"

	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/admin"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
	"github.com/meshlab/meshlab/internal/testutil"
)

// lastUpdated matches the timestamps of a config dump, the only part that varies.
var lastUpdated = regexp.MustCompile(`"last_updated": "[^"]*"`)

// TestConfigDumpGolden pins /config_dump?include_eds for a fixed input: the static
// bootstrap plus one xDS response of each type, in Envoy's order and field names.
func TestConfigDumpGolden(t *testing.T) {
	srv := newUnstartedForApply(t)
	snap := snapshotV(t, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9"), netip.MustParseAddrPort("127.0.0.2:9")})
	for _, step := range []struct {
		typeURL string
		res     []cachetypes.Resource
	}{
		{xdsclient.ClusterType, snap[resource.ClusterType]},
		{xdsclient.EndpointType, snap[resource.EndpointType]},
		{xdsclient.ListenerType, snap[resource.ListenerType]},
		{xdsclient.RouteType, snap[resource.RouteType]},
	} {
		var anys []*anypb.Any
		for _, r := range step.res {
			a, err := anypb.New(r.(proto.Message))
			if err != nil {
				t.Fatal(err)
			}
			anys = append(anys, a)
		}
		srv.xds.Subscribe(xdsclient.EndpointType, []string{backendCluster})
		srv.xds.Subscribe(xdsclient.RouteType, []string{"8080"})
		if err := srv.Apply(step.typeURL, "v1", anys); err != nil {
			t.Fatalf("apply %s: %v", step.typeURL, err)
		}
	}
	got, err := admin.MarshalJSON(srv.ConfigDump(true))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "config_dump_include_eds", lastUpdated.ReplaceAll(got, []byte(`"last_updated": "<time>"`)))
}
