package xdsclient

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeADS hands each stream to the test, which scripts it.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	streams chan discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer
}

func (f *fakeADS) StreamAggregatedResources(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	done := make(chan struct{})
	select {
	case f.streams <- &endable{s, done}:
	case <-s.Context().Done():
		return s.Context().Err()
	}
	select {
	case <-done:
	case <-s.Context().Done():
	}
	return errors.New("stream ended by the test")
}

type endable struct {
	discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer
	done chan struct{}
}

type handlerFunc func(typeURL, version string, res []*anypb.Any) error

func (f handlerFunc) Apply(t, v string, r []*anypb.Any) error { return f(t, v, r) }

func recv(t *testing.T, s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) *discoveryv3.DiscoveryRequest {
	t.Helper()
	req, err := s.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	return req
}

func TestADSProtocolLikeEnvoy(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ads.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeADS{streams: make(chan discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer, 2)}
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
	var c *Client
	c = New(Options{
		Conn: conn, Node: &corev3.Node{Id: "n1"}, Logger: testutil.Logger(t), NodeOnFirstMessage: true,
		Wildcard: []string{ClusterType}, BackoffBase: time.Millisecond, Backoff: 10 * time.Millisecond,
		Handler: handlerFunc(func(typeURL, version string, _ []*anypb.Any) error {
			if typeURL == ClusterType {
				c.Subscribe(EndpointType, []string{"b", "a", "a"})
				return nil
			}
			return errors.New("cluster load assignment 'a': bad")
		}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })

	s := <-fake.streams
	first := recv(t, s)
	if first.GetTypeUrl() != ClusterType || first.GetNode().GetId() != "n1" || len(first.GetResourceNames()) != 0 {
		t.Fatalf("first request = %v, want wildcard CDS with the node", first)
	}
	res, _ := anypb.New(&clusterv3.Cluster{Name: "a"})
	if err := s.Send(&discoveryv3.DiscoveryResponse{TypeUrl: ClusterType, VersionInfo: "v1", Nonce: "n-1", Resources: []*anypb.Any{res}}); err != nil {
		t.Fatal(err)
	}
	// Envoy's order: the EDS request for the clusters the CDS update added goes out
	// before the CDS ACK (CdsApiHelper pauses EDS during the update and resumes it first).
	eds := recv(t, s)
	if eds.GetTypeUrl() != EndpointType || len(eds.GetResourceNames()) != 2 || eds.GetResourceNames()[0] != "a" {
		t.Errorf("EDS subscription = %v, want names [a b] before the CDS ACK", eds)
	}
	ack := recv(t, s)
	if ack.GetTypeUrl() != ClusterType || ack.GetVersionInfo() != "v1" || ack.GetResponseNonce() != "n-1" || ack.GetErrorDetail() != nil || ack.GetNode() != nil {
		t.Errorf("ACK = %v, want CDS v1 nonce n-1 without node", ack)
	}
	if err := s.Send(&discoveryv3.DiscoveryResponse{TypeUrl: EndpointType, VersionInfo: "e1", Nonce: "n-2"}); err != nil {
		t.Fatal(err)
	}
	nack := recv(t, s)
	if nack.GetErrorDetail().GetCode() != 3 || nack.GetErrorDetail().GetMessage() != "cluster load assignment 'a': bad" ||
		nack.GetVersionInfo() != "" || nack.GetResponseNonce() != "n-2" {
		t.Errorf("NACK = %v, want INVALID_ARGUMENT, last good version \"\", nonce n-2", nack)
	}
	if c.Version(EndpointType) != "" || c.Version(ClusterType) != "v1" {
		t.Errorf("versions after NACK: cds %q eds %q", c.Version(ClusterType), c.Version(EndpointType))
	}

	// The control plane goes away: the client reconnects and resumes with its versions.
	close(s.(*endable).done)
	s2 := <-fake.streams
	r1, r2 := recv(t, s2), recv(t, s2)
	if r1.GetTypeUrl() != ClusterType || r1.GetVersionInfo() != "v1" || r1.GetResponseNonce() != "" || r1.GetNode().GetId() != "n1" {
		t.Errorf("first request after reconnect = %v, want CDS v1, no nonce, node", r1)
	}
	if r2.GetTypeUrl() != EndpointType || len(r2.GetResourceNames()) != 2 || r2.GetNode() != nil {
		t.Errorf("second request after reconnect = %v", r2)
	}
	close(s2.(*endable).done)
}
