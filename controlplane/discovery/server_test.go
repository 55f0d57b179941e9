package discovery

import (
	"context"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestADSAckNackAndPush(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	node := m.Pod("frontend-v1").NodeID()
	ads := dialADS(t, "unix://"+s.path, node)

	// CDS and LDS, wildcard, as Envoy asks on start.
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType})
	cds := ads.recv()
	if cds.GetTypeUrl() != resource.ClusterType || cds.GetVersionInfo() != "v1" {
		t.Fatalf("first response: type %s version %q, want CDS v1", cds.GetTypeUrl(), cds.GetVersionInfo())
	}
	wantClusters := []string{
		"BlackHoleCluster", "InboundPassthroughCluster", "PassthroughCluster", "inbound|8080||",
		"outbound|8080||backend.default.svc.cluster.local", "outbound|8080||frontend.default.svc.cluster.local",
	}
	if got := resourceNames(t, cds); !slices.Equal(got, wantClusters) {
		t.Errorf("clusters = %q, want %q", got, wantClusters)
	}
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	lds := ads.recv()
	if lds.GetTypeUrl() != resource.ListenerType || lds.GetVersionInfo() != "v1" {
		t.Fatalf("second response: type %s version %q, want LDS v1", lds.GetTypeUrl(), lds.GetVersionInfo())
	}
	if got, want := resourceNames(t, lds), []string{"0.0.0.0_8080", "virtualInbound", "virtualOutbound"}; !slices.Equal(got, want) {
		t.Errorf("listeners = %q, want %q", got, want)
	}
	ps := waitStatus(t, s, node, "CDS and LDS sent", func(ps ProxyStatus) bool {
		return ps.Types[resource.ClusterType].Sent == "v1" && ps.Types[resource.ListenerType].Sent == "v1"
	})
	if !ps.Connected {
		t.Error("status says not connected while the stream is open")
	}
	if got := ps.Types[resource.ClusterType].Nonce; got != cds.GetNonce() {
		t.Errorf("CDS nonce = %q, want %q", got, cds.GetNonce())
	}

	// ACK CDS.
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: "v1", ResponseNonce: cds.GetNonce()})
	ps = waitStatus(t, s, node, "CDS ACKed", func(ps ProxyStatus) bool { return ps.Types[resource.ClusterType].Acked == "v1" })
	if !ps.Types[resource.ClusterType].Synced() || ps.Types[resource.ClusterType].NackError != "" {
		t.Errorf("CDS after ACK = %+v, want synced without NACK", ps.Types[resource.ClusterType])
	}

	// NACK LDS: nothing applied yet, so version_info stays empty.
	before := time.Now()
	ads.send(&discoverypb.DiscoveryRequest{
		TypeUrl: resource.ListenerType, ResponseNonce: lds.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "listener 'virtualInbound': unsupported field"},
	})
	ps = waitStatus(t, s, node, "LDS NACKed", func(ps ProxyStatus) bool { return ps.Types[resource.ListenerType].NackError != "" })
	lt := ps.Types[resource.ListenerType]
	if lt.NackError != "listener 'virtualInbound': unsupported field" || lt.LastNack.Before(before) || lt.Acked != "" || lt.Synced() {
		t.Errorf("LDS after NACK = %+v", lt)
	}

	// A new model is pushed on the open stream, for both types; the rejected v1 is not
	// resent in between (which would make the proxy NACK it again, forever).
	if err := s.Update(context.Background(), helloModel("extra")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got := map[string]*discoverypb.DiscoveryResponse{}
	for range 2 {
		r := ads.recv()
		if r.GetVersionInfo() != "v2" {
			t.Fatalf("received %s version %q, want only v2 pushes", r.GetTypeUrl(), r.GetVersionInfo())
		}
		got[r.GetTypeUrl()] = r
	}
	if got[resource.ClusterType] == nil || got[resource.ListenerType] == nil {
		t.Fatalf("pushed types %v, want CDS and LDS", slices.Collect(maps.Keys(got)))
	}
	if names := resourceNames(t, got[resource.ClusterType]); !slices.Contains(names, "outbound|9090||extra.default.svc.cluster.local") {
		t.Errorf("pushed clusters %q lack the new service's cluster", names)
	}
	if names := resourceNames(t, got[resource.ListenerType]); !slices.Contains(names, "0.0.0.0_9090") {
		t.Errorf("pushed listeners %q lack the new port's listener", names)
	}
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "v2", ResponseNonce: got[resource.ListenerType].GetNonce()})
	ps = waitStatus(t, s, node, "LDS v2 ACKed", func(ps ProxyStatus) bool { return ps.Types[resource.ListenerType].Synced() })
	if lt := ps.Types[resource.ListenerType]; lt.Acked != "v2" || lt.NackError == "" {
		t.Errorf("LDS after ACK of v2 = %+v, want acked v2 with the earlier NACK kept", lt)
	}
}

func TestStatusAndRemovedPods(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	m.Pod("backend-v2").Sidecar.Inject = false
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	var ids []string
	for _, ps := range s.Status() {
		ids = append(ids, ps.NodeID)
		if ps.Connected || len(ps.Types) != 0 {
			t.Errorf("%s: never connected, status %+v", ps.NodeID, ps)
		}
	}
	want := []string{m.Pod("frontend-v1").NodeID(), m.Pod("backend-v1").NodeID()} // sorted: 10.244.0.2 < .3
	if !slices.Equal(ids, want) {
		t.Fatalf("Status nodes = %q, want the injected pods %q", ids, want)
	}
	if _, err := s.cache.GetSnapshot(m.Pod("backend-v2").NodeID()); err == nil {
		t.Error("a pod without sidecar got a snapshot")
	}

	// A connected proxy shows up; when its pod leaves the model its snapshot goes.
	ads := dialADS(t, "unix://"+s.path, m.Pod("backend-v1").NodeID())
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType})
	ads.recv()
	waitStatus(t, s, m.Pod("backend-v1").NodeID(), "connected", func(ps ProxyStatus) bool { return ps.Connected })

	smaller := helloModel()
	smaller.Pods = slices.DeleteFunc(smaller.Pods, func(p *model.Pod) bool { return p.Name == "frontend-v1" })
	if err := s.Update(context.Background(), smaller); err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, ps := range s.Status() {
		if ps.NodeID == m.Pod("frontend-v1").NodeID() {
			t.Errorf("removed pod still in Status: %+v", ps)
		}
	}
	if _, err := s.cache.GetSnapshot(m.Pod("frontend-v1").NodeID()); err == nil {
		t.Error("removed pod's snapshot is still set")
	}
	snap, err := s.cache.GetSnapshot(m.Pod("backend-v1").NodeID())
	if err != nil || snap.GetVersion(resource.ClusterType) != "v2" {
		t.Errorf("backend-v1 snapshot after second update: version %q, err %v; want v2", snap.GetVersion(resource.ClusterType), err)
	}
}

func TestUpdateErrorKeepsConfig(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	bad := helloModel()
	bad.Services = append(bad.Services, bad.Services[0]) // duplicate clusters
	if err := s.Update(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("Update with a duplicate service: err = %v, want a duplicate resource error", err)
	}
	if err := s.Update(context.Background(), nil); err == nil {
		t.Fatal("Update(nil) succeeded")
	}
	for _, p := range m.Pods {
		snap, err := s.cache.GetSnapshot(p.NodeID())
		if err != nil || snap.GetVersion(resource.ListenerType) != "v1" {
			t.Errorf("%s after failed update: err %v, want snapshot v1", p.Name, err)
		}
	}
	// The failed update burned no version: the next good one is v2.
	changed := helloModel("extra")
	if err := s.Update(context.Background(), changed); err != nil {
		t.Fatalf("Update: %v", err)
	}
	snap, _ := s.cache.GetSnapshot(m.Pods[0].NodeID())
	if got := snap.GetVersion(resource.ListenerType); got != "v2" {
		t.Errorf("version after a failed and a good update = %q, want v2", got)
	}
}

// Only proxies whose resources change get a new version: an update that changes nothing
// pushes nothing and takes no version.
func TestUpdateSkipsUnchangedProxies(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	// A pod without a sidecar that no service selects changes no proxy's resources.
	same := helloModel()
	same.Pods = append(same.Pods, &model.Pod{Name: "loner", Namespace: "default", Labels: map[string]string{"app": "loner"}, IP: netip.MustParseAddr("10.244.0.9")})
	if err := s.Update(context.Background(), same); err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, p := range m.Pods {
		snap, err := s.cache.GetSnapshot(p.NodeID())
		if err != nil || snap.GetVersion(resource.ClusterType) != "v1" {
			t.Errorf("%s after an update changing nothing: version %q, err %v; want v1", p.Name, snap.GetVersion(resource.ClusterType), err)
		}
	}
	if err := s.Update(context.Background(), helloModel("extra")); err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, p := range m.Pods {
		snap, err := s.cache.GetSnapshot(p.NodeID())
		if err != nil || snap.GetVersion(resource.ClusterType) != "v2" {
			t.Errorf("%s after an update adding a service: version %q, err %v; want v2", p.Name, snap.GetVersion(resource.ClusterType), err)
		}
	}
}

func TestTCPAndShutdownWithOpenStream(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "xds.sock")
	allowAll := func(context.Context, string) error { return nil }
	s, err := New(Options{Logger: testutil.Logger(t), SocketPath: sock, SocketGID: -1, TCPAddr: "127.0.0.1:0", Authorize: allowAll})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("socket missing right after New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if s.TCPAddr() == nil {
		t.Fatal("TCPAddr is nil with Options.TCPAddr set")
	}
	ads := dialADS(t, s.TCPAddr().String(), m.Pod("backend-v1").NodeID())
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	if r := ads.recv(); r.GetVersionInfo() != "v1" {
		t.Fatalf("LDS over TCP: version %q, want v1", r.GetVersionInfo())
	}

	// Stopping does not wait for the proxy to hang up.
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		done <- err // for cleanup
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(stopGrace - time.Second):
		t.Fatal("Run waited for the open stream")
	}
	t.Logf("stopped in %v", time.Since(start))
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket still there after Run returned: %v", err)
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestNew(t *testing.T) {
	// Not parallel: the checks after the subtests need them finished.
	log := testutil.Logger(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "no logger", opts: Options{SocketPath: filepath.Join(dir, "a.sock")}, wantErr: "Logger is required"},
		{name: "no socket", opts: Options{Logger: log}, wantErr: "SocketPath is required"},
		{name: "file in the way", opts: Options{Logger: log, SocketPath: file, SocketGID: -1}, wantErr: "non-socket file"},
		{name: "bad tcp", opts: Options{Logger: log, SocketPath: filepath.Join(dir, "b.sock"), SocketGID: -1, TCPAddr: "127.0.0.1:99999", Authorize: func(context.Context, string) error { return nil }}, wantErr: "listen on 127.0.0.1:99999"},
		{name: "tcp without auth", opts: Options{Logger: log, SocketPath: filepath.Join(dir, "c.sock"), SocketGID: -1, TCPAddr: "127.0.0.1:0"}, wantErr: "without Options.Authorize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Errorf("file in the way was touched: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.sock")); !os.IsNotExist(err) {
		t.Errorf("failed New left its socket: %v", err)
	}
}

func TestSocketGroupAndStaleSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "xds.sock")
	// A lab that crashed leaves its socket behind; the next server replaces it.
	first, err := New(Options{Logger: testutil.Logger(t), SocketPath: sock, SocketGID: -1})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	first.unixLn.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	if err := first.unixLn.Close(); err != nil {
		t.Fatal(err)
	}
	first.grpc.Stop()
	first.cancel()

	gid := os.Getgid()
	s, err := New(Options{Logger: testutil.Logger(t), SocketPath: sock, SocketGID: gid})
	if err != nil {
		t.Fatalf("New over a stale socket: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("socket still there after Close: %v", err)
		}
	})
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, want 0660", fi.Mode().Perm())
	}
	if got := int(fi.Sys().(*syscall.Stat_t).Gid); got != gid {
		t.Errorf("socket group = %d, want %d", got, gid)
	}
}
