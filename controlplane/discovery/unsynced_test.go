package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/meshlab/meshlab/internal/testutil"
)

// Synced is judged per open stream (issue 30's `apply --wait` with proxyless gRPC pods):
// a proxyless pod's agent keeps a stream of its own while its app's call opened and
// closed another that was sent CDS; the closed stream's CDS, behind the server's newer
// version, is not waited for. On an open stream, a response not yet answered, a NACK, and
// a newer version the server is to send are each named.
func TestUnsyncedJudgesOpenStreams(t *testing.T) {
	const (
		node = "sidecar~10.244.0.4~grpc-client-1.default~default.svc.cluster.local"
		cds  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
		lds  = "type.googleapis.com/envoy.config.listener.v3.Listener"
	)
	tr := newTracker(testutil.Logger(t), time.Now)
	want := map[string]string{cds: "v2", lds: "v1"}
	wantOf := func(_, typ string) string { return want[typ] }
	all := func(string) bool { return true }
	request := func(stream int64, typ, version, nonce, nack string) {
		t.Helper()
		req := &discoverypb.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: typ, VersionInfo: version, ResponseNonce: nonce}
		if nack != "" {
			req.ErrorDetail = &statuspb.Status{Message: nack}
		}
		if err := tr.onRequest(stream, req); err != nil {
			t.Fatal(err)
		}
	}
	send := func(stream int64, typ, version, nonce string) {
		tr.onResponse(context.Background(), stream, &discoverypb.DiscoveryRequest{TypeUrl: typ},
			&discoverypb.DiscoveryResponse{TypeUrl: typ, VersionInfo: version, Nonce: nonce})
	}
	for _, id := range []int64{1, 2} {
		if err := tr.onOpen(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Stream 1, the agent's: LDS v1, ACKed. Stream 2, the app's call: CDS v1, ACKed, then closed.
	request(1, lds, "", "", "")
	send(1, lds, "v1", "a")
	request(1, lds, "v1", "a", "")
	request(2, cds, "", "", "")
	send(2, cds, "v1", "b")
	request(2, cds, "v1", "b", "")
	if node, why := tr.unsynced(all, wantOf); !strings.Contains(why, "is to be sent Cluster v2 (sent v1)") || node == "" {
		t.Errorf("with the call's stream open and CDS v2 to send: %q %q, want it named", node, why)
	}
	tr.onClosed(2, nil)
	if node, why := tr.unsynced(all, wantOf); node != "" {
		t.Errorf("the call's stream closed: unsynced %q: %s; want synced", node, why)
	}
	// The node's status keeps the closed stream's CDS as its last known state (STALE).
	for _, ps := range tr.status(nil) {
		if ts := ps.Types[cds]; ts.Acked != "v1" {
			t.Errorf("status of CDS: %+v, want acked v1 kept", ts)
		}
	}

	send(1, lds, "v2", "c")
	want[lds] = "v2"
	if _, why := tr.unsynced(all, wantOf); !strings.Contains(why, "has not answered Listener v2 yet") {
		t.Errorf("LDS v2 sent, not answered: %q", why)
	}
	if node, _ := tr.unsynced(func(string) bool { return false }, wantOf); node != "" {
		t.Errorf("a node include refuses was judged: %q", node)
	}
	request(1, lds, "v1", "c", "bad listener")
	if _, why := tr.unsynced(all, wantOf); !strings.Contains(why, "rejected Listener v2: bad listener") {
		t.Errorf("LDS v2 rejected: %q", why)
	}
	send(1, lds, "v3", "d")
	want[lds] = "v3"
	request(1, lds, "v3", "d", "")
	if node, why := tr.unsynced(all, wantOf); node != "" {
		t.Errorf("LDS v3 ACKed: unsynced %q: %s", node, why)
	}
	// An answer to a superseded nonce does not answer the last response.
	send(1, lds, "v4", "e")
	want[lds] = "v4"
	request(1, lds, "v3", "d", "")
	if _, why := tr.unsynced(all, wantOf); !strings.Contains(why, "has not answered Listener v4") {
		t.Errorf("an ACK of an older nonce: %q, want v4 unanswered", why)
	}
}

// Synced, the check `apply --wait` repeats on each SyncChanges signal, agrees with
// Unsynced at each step of a push: a response sent and not answered, ACKed, and a newer
// version to send; Disconnected names the injected pods with no stream, in node id order.
func TestSyncedFollowsTheStreams(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	all := func(string) bool { return true }
	backend, frontend := m.Pod("backend-v1").NodeID(), m.Pod("frontend-v1").NodeID()
	if got := s.Disconnected(all); got != frontend {
		t.Errorf("Disconnected with no stream = %q, want the first node %q", got, frontend)
	}
	if got := s.Disconnected(func(n string) bool { return n == backend }); got != backend {
		t.Errorf("Disconnected of backend alone = %q, want it", got)
	}
	agree := func(step string, want bool) {
		t.Helper()
		node, why := s.Unsynced(all)
		if got := s.Synced(all); got != want || (node == "") != want {
			t.Errorf("%s: Synced %v, Unsynced %q %q; want synced %v", step, got, node, why, want)
		}
	}
	changed := s.SyncChanges()
	ads := dialADS(t, "unix://"+s.path, backend)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType})
	resp := ads.recv()
	waitChange(t, changed, "CDS sent")
	waitStatus(t, s, backend, "CDS sent", func(ps ProxyStatus) bool { return ps.Types[resource.ClusterType].Sent == "v1" })
	agree("CDS v1 sent, not answered", false)
	if got := s.Disconnected(all); got != frontend {
		t.Errorf("Disconnected with backend's stream open = %q, want %q", got, frontend)
	}

	changed = s.SyncChanges()
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: "v1", ResponseNonce: resp.GetNonce()})
	waitChange(t, changed, "CDS ACKed")
	agree("CDS v1 ACKed", true)

	changed = s.SyncChanges()
	if err := s.Update(context.Background(), helloModel("extra")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	resp = ads.recv()
	waitChange(t, changed, "CDS v2 sent")
	agree("CDS v2 sent, not answered", false)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: "v2", ResponseNonce: resp.GetNonce()})
	waitStatus(t, s, backend, "CDS v2 ACKed", func(ps ProxyStatus) bool { return ps.Types[resource.ClusterType].Synced() })
	agree("CDS v2 ACKed", true)
	if !s.Synced(func(n string) bool { return n != backend }) {
		t.Error("Synced with backend excluded: false, want true")
	}
}

// waitChange waits for a SyncChanges channel to close.
func waitChange(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no change signalled within 10s", what)
	}
}

// A proxy that asked for more names of a type (the EDS request for the clusters a CDS
// update added) is not synced while the cache's answer to it waits to be sent, though
// every response it was sent is ACKed: the hello lab's check met a subset cluster with
// no endpoints, a 503, when `apply --wait` returned in that window. A newer request of
// the type supersedes the queued answer, which go-control-plane drops.
func TestSyncedWaitsForAnAnswerOwed(t *testing.T) {
	const (
		node = "sidecar~10.244.0.4~frontend-v1.default~default.svc.cluster.local"
		eds  = resource.EndpointType
	)
	tr := newTracker(testutil.Logger(t), time.Now)
	all := func(string) bool { return true }
	wantOf := func(_, _ string) string { return "" }
	if err := tr.onOpen(context.Background(), 1, ""); err != nil {
		t.Fatal(err)
	}
	request := func(version, nonce string, names ...string) *discoverypb.DiscoveryRequest {
		t.Helper()
		req := &discoverypb.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: eds, VersionInfo: version, ResponseNonce: nonce, ResourceNames: names}
		if err := tr.onRequest(1, req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	send := func(req *discoverypb.DiscoveryRequest, version, nonce string) {
		tr.onResponse(context.Background(), 1, req, &discoverypb.DiscoveryResponse{TypeUrl: eds, VersionInfo: version, Nonce: nonce})
	}
	synced := func() bool {
		_, ok := tr.answered(all)
		return ok
	}
	send(request("", "", "a"), "v1", "n1")
	request("v1", "n1", "a")
	if !synced() {
		t.Fatal("EDS v1 ACKed: not synced")
	}

	more := request("v1", "n1", "a", "b")
	tr.owe(more)
	if synced() {
		t.Error("synced while the answer to the EDS request for b is queued")
	}
	if _, why := tr.unsynced(all, wantOf); why != "is yet to be sent the ClusterLoadAssignment it asked for" {
		t.Errorf("unsynced says %q", why)
	}
	send(more, "v1", "n2")
	if synced() {
		t.Error("synced before the answer for b is ACKed")
	}
	request("v1", "n2", "a", "b")
	if !synced() {
		t.Error("the answer for b ACKed: not synced")
	}

	// A request superseding an owed answer: the answer is dropped, the newer request is
	// answered at once (owed again) or waits for a snapshot that has its names.
	tr.owe(request("v1", "n2", "a", "b", "c"))
	request("v1", "n2", "a", "b")
	if !synced() {
		t.Error("owed answer superseded by a request the cache holds: not synced")
	}
	// owe of a request that is no longer the stream's last changes nothing.
	tr.owe(more)
	if !synced() {
		t.Error("owe of a superseded request marked the stream")
	}
}
