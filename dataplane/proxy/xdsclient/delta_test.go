package xdsclient

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// deltaState is what the Handler was given last, per type: the names of the whole
// state, and the version.
type deltaState struct {
	mu      sync.Mutex
	names   map[string][]string
	version map[string]string
	reject  string // a cluster name that makes the CDS update fail
	changed chan struct{}
}

func (d *deltaState) Apply(typeURL, version string, res []*anypb.Any) error {
	var names []string
	for _, a := range res {
		m, err := a.UnmarshalNew()
		if err != nil {
			return err
		}
		n := cachev3.GetResourceName(m.(cachetypes.Resource))
		if d.reject != "" && n == d.reject {
			return fmt.Errorf("cluster '%s': field is not supported by meshlab proxy", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	d.mu.Lock()
	d.names[typeURL], d.version[typeURL] = names, version
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
	return nil
}

func (d *deltaState) wait(t *testing.T, typeURL string, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		d.mu.Lock()
		got := slices.Clone(d.names[typeURL])
		d.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-d.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s state %v, want %v", typeURL[strings.LastIndexByte(typeURL, '.')+1:], got, want)
		}
	}
}

// deltaRequests records what the delta server received.
type deltaRequests struct {
	mu   sync.Mutex
	reqs []*discoveryv3.DeltaDiscoveryRequest
}

func (r *deltaRequests) add(_ int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	r.mu.Lock()
	r.reqs = append(r.reqs, proto.Clone(req).(*discoveryv3.DeltaDiscoveryRequest))
	r.mu.Unlock()
	return nil
}

// find waits for a recorded request matching ok.
func (r *deltaRequests) find(t *testing.T, what string, ok func(*discoveryv3.DeltaDiscoveryRequest) bool) *discoveryv3.DeltaDiscoveryRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, q := range r.reqs {
			if ok(q) {
				r.mu.Unlock()
				return q
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the delta server never received %s", what)
	return nil
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{}}}}
}

func snapshot(t *testing.T, version string, clusters []string, listeners []string, endpoints []string) *cachev3.Snapshot {
	t.Helper()
	res := map[resource.Type][]cachetypes.Resource{}
	for _, c := range clusters {
		res[resource.ClusterType] = append(res[resource.ClusterType], edsCluster(c))
	}
	for _, l := range listeners {
		res[resource.ListenerType] = append(res[resource.ListenerType], &listenerv3.Listener{Name: l})
	}
	for _, e := range endpoints {
		res[resource.EndpointType] = append(res[resource.EndpointType], &endpointv3.ClusterLoadAssignment{ClusterName: e})
	}
	s, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDeltaADSAgainstGoControlPlane runs the client's DELTA_GRPC protocol against
// go-control-plane's delta server: wildcard CDS and LDS, a named EDS subscription and its
// removal, updates that add, change and remove resources (the handler always sees the
// whole state), a NACK that keeps the last good state and names the field, and a
// reconnect that reports the versions held in initial_resource_versions.
func TestDeltaADSAgainstGoControlPlane(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const node = "sidecar~10.0.0.1~productpage.default~default.svc.cluster.local"
	cache := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	if err := cache.SetSnapshot(ctx, node, snapshot(t, "1", []string{"outbound|9080||reviews", "outbound|9080||ratings"}, []string{"virtualOutbound"}, []string{"outbound|9080||reviews"})); err != nil {
		t.Fatal(err)
	}
	rec := &deltaRequests{}
	sock := filepath.Join(t.TempDir(), "xds.sock")
	serve := func() func() {
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		srv := serverv3.NewServer(ctx, cache, serverv3.CallbackFuncs{StreamDeltaRequestFunc: rec.add})
		discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = gs.Serve(ln) }()
		return func() { gs.Stop(); wg.Wait() }
	}
	stop := serve()
	defer func() { stop() }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	state := &deltaState{names: map[string][]string{}, version: map[string]string{}, changed: make(chan struct{}, 1)}
	c := New(Options{Conn: conn, Node: &corev3.Node{Id: node}, Handler: state, Logger: testutil.Logger(t),
		NodeOnFirstMessage: true, Delta: true, Wildcard: []string{ClusterType, ListenerType},
		BackoffBase: 10 * time.Millisecond, Backoff: 50 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	state.wait(t, ClusterType, "outbound|9080||ratings", "outbound|9080||reviews")
	state.wait(t, ListenerType, "virtualOutbound")
	first := rec.find(t, "the first CDS request", func(q *discoveryv3.DeltaDiscoveryRequest) bool { return q.GetTypeUrl() == ClusterType })
	if first.GetNode().GetId() != node || len(first.GetResourceNamesSubscribe()) != 0 {
		t.Errorf("first CDS request: node %q, subscribe %v (want the node and a wildcard)", first.GetNode().GetId(), first.GetResourceNamesSubscribe())
	}

	// A named subscription and the resource it names.
	c.Subscribe(EndpointType, []string{"outbound|9080||reviews"})
	state.wait(t, EndpointType, "outbound|9080||reviews")

	// An update: one cluster removed (removed_resources), the handler sees the rest.
	if err := cache.SetSnapshot(ctx, node, snapshot(t, "2", []string{"outbound|9080||reviews"}, []string{"virtualOutbound"}, []string{"outbound|9080||reviews"})); err != nil {
		t.Fatal(err)
	}
	state.wait(t, ClusterType, "outbound|9080||reviews")

	// A NACK names the field and keeps the last good state.
	state.mu.Lock()
	state.reject = "outbound|9080||bad"
	state.mu.Unlock()
	if err := cache.SetSnapshot(ctx, node, snapshot(t, "3", []string{"outbound|9080||reviews", "outbound|9080||bad"}, []string{"virtualOutbound"}, []string{"outbound|9080||reviews"})); err != nil {
		t.Fatal(err)
	}
	nack := rec.find(t, "a NACK", func(q *discoveryv3.DeltaDiscoveryRequest) bool { return q.GetErrorDetail() != nil })
	if nack.GetTypeUrl() != ClusterType || !strings.Contains(nack.GetErrorDetail().GetMessage(), "field is not supported") || nack.GetResponseNonce() == "" {
		t.Errorf("NACK %v", nack)
	}
	state.wait(t, ClusterType, "outbound|9080||reviews")
	if err := cache.SetSnapshot(ctx, node, snapshot(t, "4", []string{"outbound|9080||reviews", "outbound|9080||details"}, []string{"virtualOutbound"}, []string{"outbound|9080||reviews"})); err != nil {
		t.Fatal(err)
	}
	state.wait(t, ClusterType, "outbound|9080||details", "outbound|9080||reviews")

	// Unsubscribing sends only the removed name.
	c.Subscribe(EndpointType, nil)
	rec.find(t, "the EDS unsubscribe", func(q *discoveryv3.DeltaDiscoveryRequest) bool {
		return q.GetTypeUrl() == EndpointType && slices.Equal(q.GetResourceNamesUnsubscribe(), []string{"outbound|9080||reviews"}) && len(q.GetResourceNamesSubscribe()) == 0
	})

	// A reconnect tells the server what the client holds.
	stop()
	rec.mu.Lock()
	rec.reqs = nil
	rec.mu.Unlock()
	stop = serve()
	again := rec.find(t, "the CDS request after the reconnect", func(q *discoveryv3.DeltaDiscoveryRequest) bool {
		return q.GetTypeUrl() == ClusterType && q.GetResponseNonce() == ""
	})
	held := again.GetInitialResourceVersions()
	if len(held) != 2 || held["outbound|9080||reviews"] == "" || held["outbound|9080||details"] == "" {
		t.Errorf("initial_resource_versions after the reconnect = %v, want both clusters held", held)
	}
	state.wait(t, ClusterType, "outbound|9080||details", "outbound|9080||reviews")
}
