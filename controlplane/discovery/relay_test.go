package discovery

import (
	"context"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/xds"
)

// A relaying server hands a proxy what the upstream control plane generates, and keeps
// its own view of the stream: status synced after the ACK, a history of what was sent,
// and Update generating nothing.
func TestRelayForwardsAndTracks(t *testing.T) {
	upstream, relay, node, ads := relayedBackend(t)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	resp := ads.recv()
	if resp.GetTypeUrl() != resource.ListenerType || len(resp.GetResources()) == 0 {
		t.Fatalf("relayed response %s with %d resources", resp.GetTypeUrl(), len(resp.GetResources()))
	}
	want := resourceNames(t, resp)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
	ps := waitStatus(t, relay, node, "LDS synced", func(ps ProxyStatus) bool {
		return ps.Connected && ps.Types[resource.ListenerType].Synced()
	})
	if got := ps.Types[resource.ListenerType].Sent; got != resp.GetVersionInfo() {
		t.Errorf("relay's status sent %q, want upstream's version %q", got, resp.GetVersionInfo())
	}
	// The upstream sees the ACK too.
	waitStatus(t, upstream, node, "LDS acked upstream", func(ps ProxyStatus) bool { return ps.Types[resource.ListenerType].Synced() })

	deadline := time.Now().Add(5 * time.Second)
	for len(relay.History(node)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	h := relay.History(node)
	if len(h) != 1 || h[0].Version != resp.GetVersionInfo() || h[0].Types[resource.ListenerType].Resources != len(want) {
		t.Fatalf("relay history %+v, want one snapshot of version %s with %d listeners", h, resp.GetVersionInfo(), len(want))
	}
}

// A ztunnel's delta stream is relayed too: the upstream's WDS reaches it, the relay's
// status has its two types ACKed, and the history keeps every Address by the name it was
// sent with (an Address has no name of its own).
func TestRelayZtunnelWDS(t *testing.T) {
	m := ambientHello()
	upstream := startServer(t, Options{SocketGID: -1, WDS: xds.WDSOptions{Node: "ml-test-node"}})
	if err := upstream.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	relay := startServer(t, Options{SocketGID: -1, Upstream: "unix://" + upstream.path})
	d := dialDelta(t, "unix://"+relay.path, testZtunnel)
	got := subscribeZtunnel(d, nil)
	addrs := len(got[xds.AddressType].GetResources())
	if addrs == 0 {
		t.Fatal("no Address relayed")
	}
	waitStatus(t, relay, testZtunnel, "WDS and WADS acked", func(ps ProxyStatus) bool {
		return ps.Types[xds.AddressType].Synced() && ps.Types[xds.AuthorizationType].Synced()
	})
	deadline := time.Now().Add(5 * time.Second)
	for len(relay.History(testZtunnel)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	h := relay.History(testZtunnel)
	if len(h) == 0 || h[len(h)-1].Types[xds.AddressType].Resources != addrs {
		t.Fatalf("relay history %+v, want the %d addresses sent", h, addrs)
	}
}

// A diff against meshlab's generator asked for right after istiod's push (the relay keeps
// the push out of the history until its other types are in, relayFlush) reads that push,
// not "unknown version": `meshlab diff POD --against=meshlab` run as soon as proxy-status
// says SYNCED.
func TestRelayDiffBeforeFlush(t *testing.T) {
	_, relay, node, ads := relayedBackend(t)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	resp := ads.recv()
	start := time.Now()
	d, err := relay.DiffGenerated(node, "")
	if time.Since(start) >= relayFlush || len(relay.History(node)) != 0 {
		t.Skipf("the push entered the history before the diff (%s): nothing left to test on this machine", time.Since(start))
	}
	if err != nil {
		t.Fatalf("DiffGenerated right after the push: %v", err)
	}
	if d.From != resp.GetVersionInfo() {
		t.Errorf("diff from %q, want the push's version %q", d.From, resp.GetVersionInfo())
	}
	if _, err := relay.DiffGenerated(node, resp.GetVersionInfo()); err != nil {
		t.Errorf("DiffGenerated of the pending version %s: %v", resp.GetVersionInfo(), err)
	}
}

// relayedBackend starts a control plane serving the hello model, a server relaying it,
// and backend-v1's ADS stream to the relay.
func relayedBackend(t *testing.T) (upstream, relay *Server, node string, ads *adsStream) {
	t.Helper()
	m := helloModel()
	upstream = startServer(t, Options{SocketGID: -1})
	if err := upstream.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	relay = startServer(t, Options{SocketGID: -1, Upstream: "unix://" + upstream.path})
	if err := relay.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	node = m.Pod("backend-v1").NodeID()
	return upstream, relay, node, dialADS(t, "unix://"+relay.path, node)
}
