package discovery

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestPushesOnlyChangedTypes checks, over a real ADS stream, that a change pushes a proxy
// only the types it changed, as istiod's scoped pushes do: a VirtualService change its
// routes alone, an endpoint change its load assignments alone; that proxy status wants
// of each type the version it last changed in (so an unchanged type stays synced); and
// that the history marks every type the proxy asks for ACKed in the new version, the
// unchanged ones by their earlier ACK.
func TestPushesOnlyChangedTypes(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	m := helloModel()
	if err := s.UpdateFor(ctx, m, "start"); err != nil {
		t.Fatal(err)
	}
	node := m.Pod("frontend-v1").NodeID()
	ads := dialADS(t, "unix://"+s.path, node)
	resps := make(chan *discoverypb.DiscoveryResponse, 16)
	go func() {
		for {
			r, err := ads.stream.Recv()
			if err != nil {
				close(resps)
				return
			}
			resps <- r
		}
	}()
	next := func(what string) *discoverypb.DiscoveryResponse {
		t.Helper()
		select {
		case r, ok := <-resps:
			if !ok {
				t.Fatalf("%s: stream ended", what)
			}
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no response within 10s", what)
		}
		return nil
	}
	ack := func(r *discoverypb.DiscoveryResponse, names ...string) {
		t.Helper()
		ads.send(&discoverypb.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: names})
	}
	eds := []string{"outbound|8080||backend.default.svc.cluster.local", "outbound|8080||frontend.default.svc.cluster.local"}
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType})
	ack(next("CDS"))
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	ack(next("LDS"))
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: eds})
	ack(next("EDS"), eds...)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.RouteType, ResourceNames: []string{"8080"}})
	ack(next("RDS"), "8080")
	waitStatus(t, s, node, "every type ACKed at v1", func(ps ProxyStatus) bool { return len(ps.Types) == 4 && synced(ps) })

	onlyPush := func(step, typ, version string, names ...string) *discoverypb.DiscoveryResponse {
		t.Helper()
		r := next(step)
		if r.GetTypeUrl() != typ || r.GetVersionInfo() != version {
			t.Fatalf("%s: pushed %s %s, want only %s %s", step, r.GetTypeUrl(), r.GetVersionInfo(), typ, version)
		}
		ack(r, names...)
		select {
		case r := <-resps:
			t.Fatalf("%s: also pushed %s %s; only %s changed", step, r.GetTypeUrl(), r.GetVersionInfo(), typ)
		case <-time.After(300 * time.Millisecond):
		}
		ps := waitStatus(t, s, node, step+" synced", synced)
		for tu, ts := range ps.Types {
			if want := map[bool]string{true: version, false: ts.Sent}[tu == typ]; ts.Want != want || ts.Acked != want {
				t.Errorf("%s: %s want %q acked %q, want both %q", step, tu, ts.Want, ts.Acked, want)
			}
		}
		h := s.History(node)
		last := h[len(h)-1]
		for tu, st := range last.Types {
			if _, asked := ps.Types[tu]; asked && st.State != "ACK" {
				t.Errorf("%s: history of %s: %s is %q, want ACK", step, last.Version, tu, st.State)
			}
		}
		return r
	}

	vs := withVS(helloModel(), "backend", time.Second)
	if err := s.UpdateFor(ctx, vs, "VirtualService"); err != nil {
		t.Fatal(err)
	}
	onlyPush("VirtualService", resource.RouteType, "v2", "8080")

	plain := &model.Pod{Name: "backend-v3", Namespace: "default", Labels: map[string]string{"app": "backend"},
		ServiceAccount: "backend", IP: netip.MustParseAddr("10.244.0.9"), Ports: []uint16{8080}}
	endpoint := model.New(vs.Services, append(slices.Clone(vs.Pods), plain))
	endpoint.Istio = vs.Istio
	if err := s.UpdateFor(ctx, endpoint, "endpoint"); err != nil {
		t.Fatal(err)
	}
	r := onlyPush("endpoint", resource.EndpointType, "v3", eds...)
	// Only the load assignment that changed, as istiod's incremental EDS push: the
	// proxy keeps the other, as the xDS protocol lets it for EDS and RDS.
	if got := resourceNames(t, r); !slices.Equal(got, eds[:1]) {
		t.Errorf("endpoint push carries %q, want only %q", got, eds[:1])
	}

	// A proxy that NACKs is sent everything again on the next change, not what changed
	// since the version it refused.
	plain2 := *plain
	plain2.Name, plain2.IP = "backend-v4", netip.MustParseAddr("10.244.0.10")
	more := model.New(endpoint.Services, append(slices.Clone(endpoint.Pods), &plain2))
	more.Istio = vs.Istio
	if err := s.UpdateFor(ctx, more, "endpoint again"); err != nil {
		t.Fatal(err)
	}
	r = next("endpoint again")
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.EndpointType, VersionInfo: "v3", ResponseNonce: r.GetNonce(),
		ResourceNames: eds, ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "refused"}})
	waitStatus(t, s, node, "EDS NACKed", func(ps ProxyStatus) bool { return ps.Types[resource.EndpointType].NackError != "" })
	last := withVS(helloModel(), "backend", 2*time.Second)
	last = model.New(last.Services, more.Pods)
	last.Istio = withVS(helloModel(), "backend", 2*time.Second).Istio
	plain3 := plain2
	plain3.Name, plain3.IP = "backend-v5", netip.MustParseAddr("10.244.0.11")
	last = model.New(last.Services, append(slices.Clone(more.Pods), &plain3))
	if err := s.UpdateFor(ctx, last, "after the NACK"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r = next("after the NACK")
		if r.GetTypeUrl() == resource.EndpointType {
			if got := resourceNames(t, r); !slices.Equal(got, eds) {
				t.Errorf("push after a NACK carries %q, want all of %q", got, eds)
			}
		}
	}
}

// synced reports whether every type of ps is ACKed at the version it wants.
func synced(ps ProxyStatus) bool {
	for _, ts := range ps.Types {
		if !ts.Synced() {
			return false
		}
	}
	return true
}

// TestUnchangedSubscriptionsAnsweredEmpty checks that when an EDS or RDS type changes
// only in resources a proxy does not subscribe to (a new Service: its load assignment
// and route configuration), the proxy's watch is answered with the new version and no
// resource, not with everything it subscribes to again; that the proxy ACKs its way to
// SYNCED; and that subscribing to the new resource then brings that one alone.
func TestUnchangedSubscriptionsAnsweredEmpty(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	m := helloModel()
	if err := s.UpdateFor(ctx, m, "start"); err != nil {
		t.Fatal(err)
	}
	node := m.Pod("frontend-v1").NodeID()
	ads := dialADS(t, "unix://"+s.path, node)
	next := func(what string) *discoverypb.DiscoveryResponse {
		t.Helper()
		r, err := ads.stream.Recv()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return r
	}
	ack := func(r *discoverypb.DiscoveryResponse, names ...string) {
		t.Helper()
		ads.send(&discoverypb.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce(), ResourceNames: names})
	}
	eds := []string{"outbound|8080||backend.default.svc.cluster.local", "outbound|8080||frontend.default.svc.cluster.local"}
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType})
	ack(next("CDS"))
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	ack(next("LDS"))
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: eds})
	ack(next("EDS"), eds...)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.RouteType, ResourceNames: []string{"8080"}})
	ack(next("RDS"), "8080")
	waitStatus(t, s, node, "every type ACKed at v1", func(ps ProxyStatus) bool { return len(ps.Types) == 4 && synced(ps) })

	if err := s.UpdateFor(ctx, helloModel("api"), "new service"); err != nil {
		t.Fatal(err)
	}
	got := map[string]*discoverypb.DiscoveryResponse{}
	for range 4 { // every type changed: the new Service's port is a new listener too
		r := next("new service")
		got[r.GetTypeUrl()] = r
	}
	for _, typ := range []string{resource.EndpointType, resource.RouteType} {
		r := got[typ]
		if r.GetVersionInfo() != "v2" || len(r.GetResources()) != 0 {
			t.Errorf("%s push after a new Service: version %q with %q, want v2 with no resource (nothing subscribed changed)",
				typ, r.GetVersionInfo(), resourceNames(t, r))
		}
	}
	if n := len(got[resource.ClusterType].GetResources()); n < 3 {
		t.Errorf("CDS push after a new Service carries %d clusters, want every cluster (SotW)", n)
	}
	api := "outbound|9090||api.default.svc.cluster.local"
	ack(got[resource.ClusterType])
	ack(got[resource.ListenerType])
	ack(got[resource.RouteType], "8080")
	ack(got[resource.EndpointType], eds...)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.EndpointType, VersionInfo: "v2",
		ResponseNonce: got[resource.EndpointType].GetNonce(), ResourceNames: append(slices.Clone(eds), api)})
	r := next("EDS with the new cluster")
	if names := resourceNames(t, r); r.GetVersionInfo() != "v2" || !slices.Equal(names, []string{api}) {
		t.Errorf("EDS after subscribing to %s: version %q with %q, want v2 with it alone", api, r.GetVersionInfo(), names)
	}
	ack(r, append(slices.Clone(eds), api)...)
	waitStatus(t, s, node, "every type ACKed at v2", func(ps ProxyStatus) bool { return len(ps.Types) == 4 && synced(ps) })
}
