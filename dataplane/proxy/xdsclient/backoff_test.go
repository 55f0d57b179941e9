package xdsclient

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// reconnectGaps runs a client against a control plane that ends every stream right
// after its first request (answering it first when answer is set), and returns the
// times between one stream's end and the next one's start, for streams streams.
func reconnectGaps(t *testing.T, answer bool, streams int, base, limit time.Duration) []time.Duration {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ads.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeADS{streams: make(chan discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer)}
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, fake)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); wg.Wait() })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := New(Options{
		Conn: conn, Node: &corev3.Node{Id: "n1"}, Logger: testutil.Logger(t),
		Wildcard: []string{ClusterType}, BackoffBase: base, Backoff: limit,
		Handler: handlerFunc(func(string, string, []*anypb.Any) error { return nil }),
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })

	var gaps []time.Duration
	var ended time.Time
	for i := range streams {
		var s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer
		select {
		case s = <-fake.streams:
		case <-time.After(30 * time.Second):
			t.Fatalf("stream %d not opened within 30 s (gaps so far %v)", i, gaps)
		}
		if i > 0 {
			gaps = append(gaps, time.Since(ended))
		}
		recv(t, s)
		if answer {
			if err := s.Send(&discoveryv3.DiscoveryResponse{TypeUrl: ClusterType, VersionInfo: "v1", Nonce: "n"}); err != nil {
				t.Fatal(err)
			}
			recv(t, s) // the ACK: the client has applied the response
		}
		ended = time.Now()
		close(s.(*endable).done)
	}
	return gaps
}

// TestBackoffResetsOnResponse: a control plane that answers and then goes away (a lab's
// istiod restarted by each install and rollout restart) is reconnected to at the base
// delay each time, as Envoy's gRPC mux resets its backoff on every message it receives;
// a control plane that ends streams before answering is retried ever more slowly. The
// client reset its backoff only after a stream that outlived the cap, so a proxy whose
// istiod restarted every few seconds waited up to the cap (30 s) with its old endpoints.
func TestBackoffResetsOnResponse(t *testing.T) {
	const base, limit = 40 * time.Millisecond, 20 * time.Second
	// Without the reset, the sixth wait is at least base*2^5/2 = 640 ms.
	for i, g := range reconnectGaps(t, true, 7, base, limit) {
		if g > 500*time.Millisecond {
			t.Errorf("reconnect %d after an answered stream took %v, want about the base delay %v (at most 1.5x, and scheduling)", i+1, g, base)
		}
	}
	// Unanswered streams: the waits double (jittered between 0.5x and 1.5x the delay),
	// so the fifth is at least base*2^4/2 = 320 ms.
	gaps := reconnectGaps(t, false, 6, base, limit)
	if g := gaps[4]; g < 300*time.Millisecond {
		t.Errorf("fifth reconnect after unanswered streams took %v (all %v), want at least 320 ms: the backoff grows while no stream is answered", g, gaps)
	}
}
