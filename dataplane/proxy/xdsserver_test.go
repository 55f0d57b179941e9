package proxy

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
)

// seenRequest is one DiscoveryRequest the test control plane received.
type seenRequest struct {
	TypeURL, Version, Nonce, Error string
	Names                          []string
	HasNode                        bool
}

// testXDS is a go-control-plane ADS server on a unix socket, recording every request.
type testXDS struct {
	t      testing.TB
	cache  cachev3.SnapshotCache
	socket string

	mu   sync.Mutex
	reqs []seenRequest
}

type gcpLogger struct{ t testing.TB }

func (l gcpLogger) Debugf(string, ...any) {}
func (l gcpLogger) Infof(string, ...any)  {}
func (l gcpLogger) Warnf(f string, a ...any) {
	l.t.Logf("xds server: "+f, a...)
}

func (l gcpLogger) Errorf(f string, a ...any) {
	l.t.Logf("xds server: "+f, a...)
}

func startXDS(tb testing.TB) *testXDS {
	tb.Helper()
	x := &testXDS{t: tb, socket: filepath.Join(tb.TempDir(), "xds.sock")}
	x.cache = cachev3.NewSnapshotCache(true, cachev3.IDHash{}, gcpLogger{tb})
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, req *discoverygrpc.DiscoveryRequest) error {
			r := seenRequest{
				TypeURL: req.GetTypeUrl(), Version: req.GetVersionInfo(), Nonce: req.GetResponseNonce(),
				Names: req.GetResourceNames(), HasNode: req.GetNode() != nil,
			}
			if req.GetErrorDetail() != nil {
				r.Error = req.GetErrorDetail().GetMessage()
			}
			x.mu.Lock()
			x.reqs = append(x.reqs, r)
			x.mu.Unlock()
			return nil
		},
	}
	srv := serverv3.NewServer(context.Background(), x.cache, cb)
	gs := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	ln, err := net.Listen("unix", x.socket)
	if err != nil {
		tb.Fatalf("listen on %s: %v", x.socket, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(ln)
	}()
	tb.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return x
}

func (x *testXDS) set(nodeID, version string, res map[resource.Type][]cachetypes.Resource) {
	x.t.Helper()
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		x.t.Fatalf("new snapshot: %v", err)
	}
	if err := snap.Consistent(); err != nil {
		x.t.Fatalf("snapshot %s inconsistent: %v", version, err)
	}
	if err := x.cache.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		x.t.Fatalf("set snapshot: %v", err)
	}
}

func (x *testXDS) requests() []seenRequest {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]seenRequest(nil), x.reqs...)
}

// acked reports whether the proxy ACKed version of typeURL.
func (x *testXDS) acked(typeURL, version string) bool {
	for _, r := range x.requests() {
		if r.TypeURL == typeURL && r.Version == version && r.Nonce != "" && r.Error == "" {
			return true
		}
	}
	return false
}

// nack returns the error of the first NACK of typeURL, or "".
func (x *testXDS) nack(typeURL string) string {
	for _, r := range x.requests() {
		if r.TypeURL == typeURL && r.Error != "" {
			return r.Error
		}
	}
	return ""
}
