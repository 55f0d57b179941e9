package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// deltaStream is a raw delta ADS client stream, as Envoy with DELTA_GRPC opens it.
type deltaStream struct {
	t      *testing.T
	stream discoverypb.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node   *core.Node
	sent   bool
	resps  chan *discoverypb.DeltaDiscoveryResponse
}

func dialDelta(t *testing.T, target, nodeID string) *deltaStream {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("open delta ADS stream: %v", err)
	}
	d := &deltaStream{t: t, stream: stream, node: &core.Node{Id: nodeID}, resps: make(chan *discoverypb.DeltaDiscoveryResponse, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			d.resps <- resp
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Close()
	})
	return d
}

func (d *deltaStream) send(req *discoverypb.DeltaDiscoveryRequest) {
	d.t.Helper()
	if !d.sent {
		req.Node, d.sent = d.node, true
	}
	if err := d.stream.Send(req); err != nil {
		d.t.Fatalf("send delta %s request: %v", req.GetTypeUrl(), err)
	}
}

// recv returns the next response, failing after 10s.
func (d *deltaStream) recv() *discoverypb.DeltaDiscoveryResponse {
	d.t.Helper()
	select {
	case r := <-d.resps:
		return r
	case <-time.After(10 * time.Second):
		d.t.Fatal("no delta response within 10s")
		return nil
	}
}

// quiet fails if a response arrives within d.
func (d *deltaStream) quiet(within time.Duration) {
	d.t.Helper()
	select {
	case r := <-d.resps:
		d.t.Fatalf("unexpected delta response: %s version %s, %d resources", r.GetTypeUrl(), r.GetSystemVersionInfo(), len(r.GetResources()))
	case <-time.After(within):
	}
}

func deltaNames(r *discoverypb.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.GetResources() {
		out = append(out, res.GetName())
	}
	slices.Sort(out)
	return out
}

// TestDeltaADS subscribes as an Envoy with DELTA_GRPC does (CDS and LDS wildcard, then EDS
// and RDS by name), and checks that ACKs make the proxy SYNCED in Status, that a
// VirtualService change sends only the changed route configuration, that a NACK is
// recorded (and not answered by the same config again), and that the push faults hold
// delta pushes too.
func TestDeltaADS(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	m := helloModel()
	if err := s.UpdateFor(ctx, m, "start"); err != nil {
		t.Fatal(err)
	}
	node := m.Pod("frontend-v1").NodeID()
	d := dialDelta(t, "unix://"+s.path, node)
	ack := func(r *discoverypb.DeltaDiscoveryResponse) {
		d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}})
	cds := d.recv()
	if cds.GetTypeUrl() != resource.ClusterType || cds.GetSystemVersionInfo() != "v1" || len(cds.GetResources()) == 0 {
		t.Fatalf("first delta CDS: %s version %q, %d resources", cds.GetTypeUrl(), cds.GetSystemVersionInfo(), len(cds.GetResources()))
	}
	snap, err := s.cache.GetSnapshot(node)
	if err != nil {
		t.Fatal(err)
	}
	var eds []string
	for name := range snap.(*cachev3.Snapshot).GetResources(resource.EndpointType) {
		eds = append(eds, name)
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: eds})
	ack(cds)
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResourceNamesSubscribe: []string{"*"}})
	var rds []string
	for name := range snap.(*cachev3.Snapshot).GetResources(resource.RouteType) {
		rds = append(rds, name)
	}
	got := map[string]*discoverypb.DeltaDiscoveryResponse{}
	for len(got) < 3 {
		r := d.recv()
		got[r.GetTypeUrl()] = r
		if r.GetTypeUrl() == resource.ListenerType {
			d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResourceNamesSubscribe: rds})
		}
		ack(r)
	}
	ps := waitStatus(t, s, node, "every type ACKed over delta", func(ps ProxyStatus) bool {
		synced := len(ps.Types) == 4
		for _, ts := range ps.Types {
			synced = synced && ts.Synced() && ts.Acked == "v1"
		}
		return synced
	})
	if !ps.Delta || !ps.Connected {
		t.Errorf("status %+v, want a connected delta proxy", ps)
	}

	// A VirtualService change: only the route configuration changes, so only RDS is sent.
	vs := withVS(helloModel(), "backend", time.Second)
	vs.Istio.VirtualServices[0].Spec.Http[0].Route[0].Destination.Subset = ""
	if err := s.UpdateFor(ctx, vs, "apply: VirtualService default/backend"); err != nil {
		t.Fatal(err)
	}
	r := d.recv()
	if r.GetTypeUrl() != resource.RouteType || r.GetSystemVersionInfo() != "v2" || !slices.Equal(deltaNames(r), rds) {
		t.Fatalf("after the VirtualService change: %s version %q names %v, want RDS v2 %v", r.GetTypeUrl(), r.GetSystemVersionInfo(), deltaNames(r), rds)
	}
	d.quiet(200 * time.Millisecond)
	ps = waitStatus(t, s, node, "RDS v2 sent", func(ps ProxyStatus) bool { return ps.Types[resource.RouteType].Sent == "v2" })
	if rt := ps.Types[resource.RouteType]; rt.Synced() || rt.Want != "v2" {
		t.Errorf("RDS before the ACK: %+v, want v2 wanted, not synced", rt)
	}
	if ct := ps.Types[resource.ClusterType]; !ct.Synced() || ct.Want != "v1" {
		t.Errorf("CDS after a route-only change: %+v, want synced on v1 (nothing to push)", ct)
	}
	ack(r)
	waitStatus(t, s, node, "RDS v2 ACKed", func(ps ProxyStatus) bool {
		synced := true
		for _, ts := range ps.Types {
			synced = synced && ts.Synced()
		}
		return synced && ps.Types[resource.RouteType].Acked == "v2"
	})

	// The nack fault: the proxy rejects the listener; the server records it and does not
	// send the rejected config again.
	if err := s.SetNack(ctx, node, true); err != nil {
		t.Fatal(err)
	}
	r = d.recv()
	if r.GetTypeUrl() != resource.ListenerType || !slices.Contains(deltaNames(r), NackListenerName) {
		t.Fatalf("nack fault sent %s %v, want LDS with %s", r.GetTypeUrl(), deltaNames(r), NackListenerName)
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: r.GetNonce(),
		ErrorDetail: &status.Status{Message: "Error adding/updating listener(s) " + NackListenerName}})
	ps = waitStatus(t, s, node, "LDS NACK recorded", func(ps ProxyStatus) bool { return ps.Types[resource.ListenerType].NackError != "" })
	if lt := ps.Types[resource.ListenerType]; lt.Acked != "v1" || lt.Sent != "v3" || lt.Synced() {
		t.Errorf("LDS after the NACK: %+v, want sent v3, acked the last applied, not synced", lt)
	}
	d.quiet(300 * time.Millisecond)
	h := s.History(node)
	if last := h[len(h)-1]; last.Version != "v3" || last.Types[resource.ListenerType].State != "NACK" {
		t.Errorf("history's last snapshot %+v, want v3 with LDS NACKed", last)
	}

	// Held pushes are held for delta streams too.
	s.HoldPushes(node)
	if err := s.SetNack(ctx, node, false); err != nil {
		t.Fatal(err)
	}
	d.quiet(200 * time.Millisecond)
	s.ReleasePushes(node)
	if r := d.recv(); r.GetTypeUrl() != resource.ListenerType || !slices.Contains(r.GetRemovedResources(), NackListenerName) {
		t.Errorf("released push: %s %v removed %v, want LDS removing %s", r.GetTypeUrl(), deltaNames(r), r.GetRemovedResources(), NackListenerName)
	}
}
