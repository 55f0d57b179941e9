package discovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshlab/meshlab/internal/testutil"
)

// recordingAuthorizer accepts the node ids of allow for the credentials it checks, and
// records what every call saw.
type recordingAuthorizer struct {
	mu     sync.Mutex
	allow  map[string]string // node id -> bearer token ("" = unix peer of this process)
	seenPC []PeerCred
}

func (a *recordingAuthorizer) authorize(ctx context.Context, nodeID string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	want, ok := a.allow[nodeID]
	if !ok {
		return fmt.Errorf("node id %q is no proxy of this lab", nodeID)
	}
	if pc, ok := PeerCredFromContext(ctx); ok {
		a.seenPC = append(a.seenPC, pc)
		if want == "" && int(pc.PID) == os.Getpid() {
			return nil
		}
		return errors.New("unix peer is not the proxy")
	}
	if tok := BearerToken(ctx); tok == "" || tok != want {
		return status.Error(codes.Unauthenticated, "missing or wrong bearer token")
	}
	return nil
}

// openADS opens an ADS stream with optional metadata and sends one LDS request as node.
func openADS(t *testing.T, target string, md metadata.MD, node string) discoverypb.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", target, err)
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 20*time.Second)
	t.Cleanup(func() {
		cancel()
		conn.Close()
	})
	stream, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("open ADS stream: %v", err)
	}
	if err := stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, Node: &core.Node{Id: node}}); err != nil {
		t.Fatalf("send: %v", err)
	}
	return stream
}

// wantRefused fails unless the stream ends with code.
func wantRefused(t *testing.T, stream discoverypb.AggregatedDiscoveryService_StreamAggregatedResourcesClient, code codes.Code) {
	t.Helper()
	resp, err := stream.Recv()
	if err == nil {
		t.Fatalf("stream served (version %s), want it refused with %s", resp.GetVersionInfo(), code)
	}
	if got := status.Code(err); got != code {
		t.Fatalf("stream ended with %v, want %s", err, code)
	}
}

// noTrace fails if proxy-status shows a stream or a NACK for id.
func noTrace(t *testing.T, s *Server, id string) {
	t.Helper()
	for _, ps := range s.Status() {
		if ps.NodeID != id {
			continue
		}
		if ps.Connected {
			t.Errorf("proxy-status shows %s connected after a refused stream", id)
		}
		for typ, ts := range ps.Types {
			if ts.NackError != "" || ts.Acked != "" {
				t.Errorf("proxy-status shows %s %s acked %q nack %q from a refused stream", id, typ, ts.Acked, ts.NackError)
			}
		}
	}
}

func TestAuthUnixSocketBindsNodeID(t *testing.T) {
	t.Parallel()
	m := helloModel()
	frontend, backend := m.Pod("frontend-v1").NodeID(), m.Pod("backend-v1").NodeID()
	auth := &recordingAuthorizer{allow: map[string]string{frontend: ""}}
	sock := filepath.Join(t.TempDir(), "xds.sock")
	var (
		refusedMu sync.Mutex
		refused   []string
	)
	onRefused := func(node string, err error) {
		refusedMu.Lock()
		defer refusedMu.Unlock()
		refused = append(refused, fmt.Sprintf("%s %s", node, status.Code(err)))
	}
	s := startServer(t, Options{SocketPath: sock, SocketGID: -1, Authorize: auth.authorize, OnRefused: onRefused})
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}

	ok := openADS(t, "unix://"+sock, nil, frontend)
	if r, err := ok.Recv(); err != nil || r.GetVersionInfo() != "v1" {
		t.Fatalf("authorized stream: version %q err %v, want v1", r.GetVersionInfo(), err)
	}
	// The same stream may not switch to another proxy's node id.
	if err := ok.Send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType, Node: &core.Node{Id: backend}}); err != nil {
		t.Fatalf("send: %v", err)
	}
	wantRefused(t, ok, codes.PermissionDenied)

	wantRefused(t, openADS(t, "unix://"+sock, nil, backend), codes.PermissionDenied)
	wantRefused(t, openADS(t, "unix://"+sock, nil, ""), codes.InvalidArgument)
	noTrace(t, s, backend)
	refusedMu.Lock()
	if want := []string{backend + " PermissionDenied", backend + " PermissionDenied", " InvalidArgument"}; fmt.Sprint(refused) != fmt.Sprint(want) {
		t.Errorf("OnRefused saw %q, want %q", refused, want)
	}
	refusedMu.Unlock()

	auth.mu.Lock()
	defer auth.mu.Unlock()
	if len(auth.seenPC) == 0 {
		t.Fatal("authorizer saw no peer credentials on the unix socket")
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		t.Fatal(err)
	}
	pc := auth.seenPC[0]
	if int(pc.PID) != os.Getpid() || int(pc.UID) != os.Getuid() || pc.NetNSIno != self.Ino || pc.NetNSDev != self.Dev {
		t.Errorf("peer credentials %+v, want pid %d uid %d netns %d:%d", pc, os.Getpid(), os.Getuid(), self.Dev, self.Ino)
	}
}

func TestAuthTCPRequiresBearerToken(t *testing.T) {
	// Not parallel: the checks after the subtests need them finished.
	if _, err := New(Options{Logger: testutil.Logger(t), SocketPath: filepath.Join(t.TempDir(), "xds.sock"), SocketGID: -1, TCPAddr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "Authorize") {
		t.Fatalf("New with TCP and no Authorize: err %v, want a refusal naming Options.Authorize", err)
	}

	m := helloModel()
	frontend, backend := m.Pod("frontend-v1").NodeID(), m.Pod("backend-v1").NodeID()
	auth := &recordingAuthorizer{allow: map[string]string{frontend: "tok-frontend", backend: "tok-backend"}}
	s := startServer(t, Options{SocketGID: -1, TCPAddr: "127.0.0.1:0", Authorize: auth.authorize})
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	addr := s.TCPAddr().String()
	bearer := func(tok string) metadata.MD { return metadata.Pairs("authorization", "Bearer "+tok) }

	for _, tc := range []struct {
		name string
		md   metadata.MD
		node string
		want codes.Code
	}{
		{name: "no token", node: backend, want: codes.Unauthenticated},
		{name: "unknown token", md: bearer("guess"), node: backend, want: codes.Unauthenticated},
		{name: "another pod's token", md: bearer("tok-frontend"), node: backend, want: codes.Unauthenticated},
		{name: "unknown node", md: bearer("tok-backend"), node: "sidecar~10.0.0.9~attacker.default~default.svc.cluster.local", want: codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, openADS(t, addr, tc.md, tc.node), tc.want)
		})
	}
	noTrace(t, s, backend)

	ok := openADS(t, addr, bearer("tok-backend"), backend)
	if r, err := ok.Recv(); err != nil || r.GetVersionInfo() != "v1" {
		t.Fatalf("stream with the pod's token: version %q err %v, want v1", r.GetVersionInfo(), err)
	}
}

func TestAuthDeltaStreamBindsNodeID(t *testing.T) {
	t.Parallel()
	m := helloModel()
	frontend, backend := m.Pod("frontend-v1").NodeID(), m.Pod("backend-v1").NodeID()
	auth := &recordingAuthorizer{allow: map[string]string{frontend: ""}}
	sock := filepath.Join(t.TempDir(), "xds.sock")
	s := startServer(t, Options{SocketPath: sock, SocketGID: -1, Authorize: auth.authorize})
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	open := func(node string) discoverypb.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(func() { cancel(); conn.Close() })
		st, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, Node: &core.Node{Id: node}}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if r, err := open(frontend).Recv(); err != nil || len(r.GetResources()) == 0 {
		t.Fatalf("delta stream of the connecting pod: %v (%d resources)", err, len(r.GetResources()))
	}
	_, err := open(backend).Recv()
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("delta stream claiming another pod: %v, want PermissionDenied", err)
	}
	noTrace(t, s, backend)
}
