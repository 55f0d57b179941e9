package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// connectLDS updates s with helloModel, opens a stream as frontend-v1, asks for LDS and
// ACKs v1; it returns the stream and the node id.
func connectLDS(t *testing.T, s *Server) (*adsStream, string) {
	t.Helper()
	m := helloModel()
	if err := s.UpdateFor(context.Background(), m, "start"); err != nil {
		t.Fatalf("Update: %v", err)
	}
	node := m.Pod("frontend-v1").NodeID()
	ads := dialADS(t, "unix://"+s.path, node)
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	lds := ads.recv()
	if lds.GetVersionInfo() != "v1" {
		t.Fatalf("first LDS version %q, want v1", lds.GetVersionInfo())
	}
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "v1", ResponseNonce: lds.GetNonce()})
	waitStatus(t, s, node, "LDS v1 ACKed", func(ps ProxyStatus) bool { return ps.Types[resource.ListenerType].Synced() })
	return ads, node
}

func TestFaultHoldPushMakesProxyStaleUntilReleased(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ads, node := connectLDS(t, s)

	s.HoldPushes(node)
	if err := s.UpdateFor(context.Background(), helloModel("extra"), "apply"); err != nil {
		t.Fatalf("Update: %v", err)
	}
	ps := waitStatus(t, s, node, "LDS v2 recorded as sent", func(ps ProxyStatus) bool {
		return ps.Types[resource.ListenerType].Sent == "v2"
	})
	if lt := ps.Types[resource.ListenerType]; lt.Synced() || lt.Acked != "v1" {
		t.Errorf("LDS while held = %+v, want sent v2, acked v1 (STALE)", lt)
	}
	got := make(chan *discoverypb.DiscoveryResponse, 1)
	go func() {
		resp, err := ads.stream.Recv()
		if err == nil {
			got <- resp
		}
	}()
	select {
	case resp := <-got:
		t.Fatalf("a held push arrived: version %s", resp.GetVersionInfo())
	case <-time.After(200 * time.Millisecond):
	}

	s.ReleasePushes(node)
	select {
	case resp := <-got:
		if resp.GetVersionInfo() != "v2" {
			t.Errorf("released push version %q, want v2", resp.GetVersionInfo())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("released push did not arrive within 10s")
	}
}

func TestFaultDelayPush(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ads, node := connectLDS(t, s)

	const delay = 300 * time.Millisecond
	s.SetPushDelay(node, delay)
	start := time.Now()
	if err := s.UpdateFor(context.Background(), helloModel("extra"), "apply"); err != nil {
		t.Fatalf("Update: %v", err)
	}
	resp := ads.recv()
	if took := time.Since(start); took < delay {
		t.Errorf("push arrived after %v, want at least the %v delay", took, delay)
	}
	if resp.GetVersionInfo() != "v2" {
		t.Errorf("delayed push version %q, want v2", resp.GetVersionInfo())
	}
	s.SetPushDelay(node, 0)
	s.faults.mu.Lock()
	n := len(s.faults.delay)
	s.faults.mu.Unlock()
	if n != 0 {
		t.Errorf("%d delays left after clearing", n)
	}
}

func TestFaultNackSendsARejectedListenerThenTheRealConfig(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ads, node := connectLDS(t, s)

	if err := s.SetNack(context.Background(), node, true); err != nil {
		t.Fatalf("SetNack: %v", err)
	}
	bad := ads.recv()
	if got := resourceNames(t, bad); !slices.Contains(got, NackListenerName) || bad.GetVersionInfo() != "v2" {
		t.Fatalf("nack push: version %s listeners %q, want v2 with %s", bad.GetVersionInfo(), got, NackListenerName)
	}
	const msg = "filters[0].typed_config: unsupported type google.protobuf.Empty"
	ads.send(&discoverypb.DiscoveryRequest{
		TypeUrl: resource.ListenerType, VersionInfo: "v1", ResponseNonce: bad.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: msg},
	})
	waitStatus(t, s, node, "LDS NACKed", func(ps ProxyStatus) bool { return ps.Types[resource.ListenerType].NackError == msg })
	h := s.History(node)
	if len(h) != 2 || h[1].Trigger != "fault: nack" || h[1].Types[resource.ListenerType].State != "NACK" ||
		h[1].Types[resource.ListenerType].Error != msg || h[0].Types[resource.ListenerType].State != "ACK" {
		t.Errorf("history = %+v, want v1 ACK then v2 by the nack fault, NACKed", h)
	}

	if err := s.SetNack(context.Background(), node, false); err != nil {
		t.Fatalf("SetNack off: %v", err)
	}
	good := ads.recv()
	if got := resourceNames(t, good); slices.Contains(got, NackListenerName) || good.GetVersionInfo() != "v3" {
		t.Fatalf("after clear: version %s listeners %q, want v3 without %s", good.GetVersionInfo(), got, NackListenerName)
	}
}

func TestFaultStopForDropsStreamsAndRefusesUntilOver(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ads, node := connectLDS(t, s)

	const stop = time.Second
	s.StopFor(stop)
	if !s.Stopped() {
		t.Error("Stopped() = false right after StopFor")
	}
	if _, err := ads.stream.Recv(); err == nil {
		t.Fatal("the open stream got a response after the stop, want it closed")
	}
	waitStatus(t, s, node, "disconnected", func(ps ProxyStatus) bool { return !ps.Connected })

	// While stopped, a new stream is closed before it gets anything.
	if resp, err := tryLDS(s.path, node); err == nil && s.Stopped() {
		t.Fatalf("a stream opened during the stop got version %s", resp.GetVersionInfo())
	}

	deadline := time.Now().Add(10 * time.Second)
	for s.Stopped() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	after := dialADS(t, "unix://"+s.path, node)
	after.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	if resp := after.recv(); resp.GetVersionInfo() != "v1" {
		t.Errorf("after the stop: version %q, want v1", resp.GetVersionInfo())
	}
	waitStatus(t, s, node, "reconnected", func(ps ProxyStatus) bool { return ps.Connected })
}

// tryLDS opens a stream, asks for LDS and returns the answer or the first error.
func tryLDS(path, node string) (*discoverypb.DiscoveryResponse, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&discoverypb.DiscoveryRequest{Node: &core.Node{Id: node}, TypeUrl: resource.ListenerType}); err != nil {
		return nil, err
	}
	return stream.Recv()
}
