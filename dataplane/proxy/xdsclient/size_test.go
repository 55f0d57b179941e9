package xdsclient

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestReceivesResponsesAboveGRPCDefault: a response of 12 MiB, three times gRPC's
// default receive limit, is applied and ACKed rather than dropping the stream ("received
// message larger than max"), which made every proxy of a lab STALE.
func TestReceivesResponsesAboveGRPCDefault(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ads.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeADS{streams: make(chan discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer, 2)}
	gs := grpc.NewServer(grpc.MaxSendMsgSize(MaxMessageBytes))
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

	applied := make(chan int, 1)
	c := New(Options{
		Conn: conn, Node: &corev3.Node{Id: "n1"}, Logger: testutil.Logger(t), NodeOnFirstMessage: true,
		Wildcard: []string{ClusterType}, BackoffBase: time.Millisecond, Backoff: 10 * time.Millisecond,
		Handler: handlerFunc(func(_, _ string, res []*anypb.Any) error {
			applied <- len(res)
			return nil
		}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })

	s := <-fake.streams
	recv(t, s)
	const n = 12
	var res []*anypb.Any
	for i := range n {
		a, err := anypb.New(&clusterv3.Cluster{Name: strings.Repeat(string(rune('a'+i)), 1<<20)})
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, a)
	}
	if err := s.Send(&discoveryv3.DiscoveryResponse{TypeUrl: ClusterType, VersionInfo: "v1", Nonce: "big", Resources: res}); err != nil {
		t.Fatalf("send 12 MiB response: %v", err)
	}
	select {
	case got := <-applied:
		if got != n {
			t.Fatalf("applied %d clusters, want %d", got, n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("12 MiB response not applied within 20s")
	}
	if ack := recv(t, s); ack.GetResponseNonce() != "big" || ack.GetErrorDetail() != nil {
		t.Errorf("after the large response: %v, want its ACK", ack)
	}
	close(s.(*endable).done)
}
