package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
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
