package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// A named LDS or CDS request, as a proxyless gRPC client subscribes, is answered with the
// named resources that exist and without the others, as istiod answers it; RDS keeps
// go-control-plane's rule of waiting for a resource the snapshot lacks.
func TestNamedRequestsAnswerWhatExists(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	ads := dialADS(t, "unix://"+s.path, m.Pod("frontend-v1").NodeID())

	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, ResourceNames: []string{"virtualOutbound", "nosuch:8080"}})
	lds := ads.recv()
	if got := resourceNames(t, lds); lds.GetVersionInfo() != "v1" || !slices.Equal(got, []string{"virtualOutbound"}) {
		t.Fatalf("named LDS answer: version %q listeners %q, want v1 with only virtualOutbound", lds.GetVersionInfo(), got)
	}
	// The ACK repeats the names: nothing is resent.
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "v1", ResponseNonce: lds.GetNonce(),
		ResourceNames: []string{"virtualOutbound", "nosuch:8080"}})
	// A new absent name is answered at once, at the same version.
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "v1", ResponseNonce: lds.GetNonce(),
		ResourceNames: []string{"virtualOutbound", "nosuch:8080", "other:80"}})
	lds2 := ads.recv()
	if got := resourceNames(t, lds2); lds2.GetVersionInfo() != "v1" || !slices.Equal(got, []string{"virtualOutbound"}) {
		t.Fatalf("LDS answer to a new absent name: version %q listeners %q, want v1 with virtualOutbound", lds2.GetVersionInfo(), got)
	}

	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNames: []string{"outbound|8080||nosuch.default.svc.cluster.local"}})
	cds := ads.recv()
	if cds.GetTypeUrl() != resource.ClusterType || len(cds.GetResources()) != 0 || cds.GetVersionInfo() != "v1" {
		t.Fatalf("CDS answer naming only an absent cluster: type %s version %q %d resources, want an empty CDS v1",
			cds.GetTypeUrl(), cds.GetVersionInfo(), len(cds.GetResources()))
	}

	// RDS naming a route configuration the snapshot lacks gets no answer.
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.RouteType, ResourceNames: []string{"nosuch"}})
	got := make(chan *discoverypb.DiscoveryResponse, 1)
	go func() {
		if r, err := ads.stream.Recv(); err == nil {
			got <- r
		}
	}()
	select {
	case r := <-got:
		t.Fatalf("RDS naming an absent route configuration was answered: %s %q", r.GetTypeUrl(), resourceNames(t, r))
	case <-time.After(300 * time.Millisecond):
	}
}

// A proxyless gRPC pod's client walks LDS, RDS, CDS and EDS by name, as grpc-go's xDS
// resolver does for xds:///backend:8080, and gets istiod's gRPC shapes.
func TestProxylessGRPCWalk(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	m.Pod("frontend-v1").Sidecar.GRPCAgent = true
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	ads := dialADS(t, "unix://"+s.path, m.Pod("frontend-v1").NodeID())
	walk := []struct {
		typ, name string
	}{
		{resource.ListenerType, "backend:8080"},
		{resource.RouteType, "outbound|8080||backend.default.svc.cluster.local"},
		{resource.ClusterType, "outbound|8080||backend.default.svc.cluster.local"},
		{resource.EndpointType, "outbound|8080||backend.default.svc.cluster.local"},
	}
	for _, w := range walk {
		ads.send(&discoverypb.DiscoveryRequest{TypeUrl: w.typ, ResourceNames: []string{w.name}})
		r := ads.recv()
		if got := resourceNames(t, r); r.GetTypeUrl() != w.typ || !slices.Equal(got, []string{w.name}) {
			t.Fatalf("%s %s: answered %s %q", w.typ, w.name, r.GetTypeUrl(), got)
		}
	}
}
