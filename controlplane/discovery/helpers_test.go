package discovery

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// helloModel is the hello scenario with fixed addresses, plus extra services named in
// extra (each HTTP on 9090, selecting nothing).
func helloModel(extra ...string) *model.Model {
	httpPort := []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080, Protocol: model.ProtocolHTTP}}
	svc := func(name, vip string) *model.Service {
		return &model.Service{
			Name: name, Namespace: "default", VIP: netip.MustParseAddr(vip), Ports: httpPort,
			Selector: map[string]string{"app": name},
		}
	}
	pod := func(name, app, ip string) *model.Pod {
		return &model.Pod{
			Name: name, Namespace: "default", Workload: name, Labels: map[string]string{"app": app},
			ServiceAccount: app, IP: netip.MustParseAddr(ip), Ports: []uint16{8080},
			Sidecar: model.SidecarSpec{Inject: true},
		}
	}
	services := []*model.Service{svc("frontend", "10.96.0.11"), svc("backend", "10.96.0.10")}
	for i, name := range extra {
		s := svc(name, netip.AddrFrom4([4]byte{10, 96, 1, byte(i + 1)}).String())
		s.Ports = []model.ServicePort{{Name: "http", Port: 9090, TargetPort: 9090}}
		services = append(services, s)
	}
	return model.New(services, []*model.Pod{
		pod("frontend-v1", "frontend", "10.244.0.2"),
		pod("backend-v1", "backend", "10.244.0.3"),
		pod("backend-v2", "backend", "10.244.0.4"),
	})
}

// startServer creates a server on a socket in a temporary directory and runs it until
// the test ends; cleanup stops it and checks that the socket is gone.
func startServer(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testutil.Logger(t)
	}
	if o.SocketPath == "" {
		o.SocketPath = filepath.Join(t.TempDir(), "xds.sock")
	}
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10s of cancel")
		}
		if _, err := os.Stat(o.SocketPath); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket %s still there after Run returned (stat: %v)", o.SocketPath, err)
		}
	})
	return s
}

// adsStream is a raw ADS client stream, as a proxy opens it.
type adsStream struct {
	t      *testing.T
	stream discoverypb.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *core.Node
	sent   bool
}

// dialADS opens an ADS stream to target (a grpc target such as "unix:///path") as
// nodeID; the connection closes when the test ends.
func dialADS(t *testing.T, target, nodeID string) *adsStream {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", target, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(func() {
		cancel()
		conn.Close()
	})
	stream, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("open ADS stream: %v", err)
	}
	return &adsStream{t: t, stream: stream, node: &core.Node{Id: nodeID, Cluster: "test"}}
}

// send sends req, with the node only on the first request of the stream, as Envoy does
// with set_node_on_first_message_only.
func (a *adsStream) send(req *discoverypb.DiscoveryRequest) {
	a.t.Helper()
	if !a.sent {
		req.Node = a.node
		a.sent = true
	}
	if err := a.stream.Send(req); err != nil {
		a.t.Fatalf("send %s request: %v", req.GetTypeUrl(), err)
	}
}

// recv returns the next response, failing the test if none arrives within 10s.
func (a *adsStream) recv() *discoverypb.DiscoveryResponse {
	a.t.Helper()
	type result struct {
		resp *discoverypb.DiscoveryResponse
		err  error
	}
	c := make(chan result, 1)
	go func() {
		resp, err := a.stream.Recv()
		c <- result{resp, err}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			a.t.Fatalf("receive: %v", r.err)
		}
		return r.resp
	case <-time.After(10 * time.Second):
		a.t.Fatal("no response within 10s")
		return nil
	}
}

// resourceNames unpacks a response's resources and returns their names, sorted.
func resourceNames(t *testing.T, resp *discoverypb.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range resp.GetResources() {
		msg, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
		if err != nil {
			t.Fatalf("unpack %s: %v", a.GetTypeUrl(), err)
		}
		out = append(out, cachev3.GetResourceName(msg))
	}
	slices.Sort(out)
	return out
}

// waitStatus polls Status until cond holds for node id, failing after 10s.
func waitStatus(t *testing.T, s *Server, id string, what string, cond func(ProxyStatus) bool) ProxyStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last ProxyStatus
	for time.Now().Before(deadline) {
		for _, ps := range s.Status() {
			if ps.NodeID == id {
				last = ps
				if cond(ps) {
					return ps
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("status of %s: %s did not happen within 10s; last status %+v", id, what, last)
	return last
}

// closeSend ends the client's side of the stream, as a proxy that shuts down does.
func (a *adsStream) closeSend() {
	a.t.Helper()
	if err := a.stream.CloseSend(); err != nil {
		a.t.Fatalf("close ADS stream: %v", err)
	}
}
