package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/internal/testutil"
)

// proxylessLab is what a proxyless agent talks to on the lab's xds.sock: the CA and a
// go-control-plane ADS server holding a snapshot for one node id.
func proxylessLab(t *testing.T, dir, nodeID string) (sock, tokenPath string) {
	t.Helper()
	root, err := ca.NewRoot(ca.DefaultTrustDomain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	authority, err := ca.New(ca.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	tokens := ca.NewTokens()
	tok, err := tokens.Issue(ca.Caller{Pod: "echo-v1", Identity: ca.Identity{Namespace: "default", ServiceAccount: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	tokenPath = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	cache := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	snap, err := cachev3.NewSnapshot("v1", map[resource.Type][]types.Resource{
		resource.ListenerType: {&listenerv3.Listener{Name: "xds.istio.io/grpc/lds/inbound/0.0.0.0:17070"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(dir, "xds.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	ca.NewService(authority, tokens, testutil.Logger(t)).Register(g)
	ctx, cancel := context.WithCancel(context.Background())
	discoverypb.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(ctx, cache, nil))
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); cancel() })
	return sock, tokenPath
}

// TestProxylessAgent runs the agent in proxyless mode against a real CA and ADS server:
// it starts no proxy, writes the gRPC bootstrap naming its XDS socket and the
// certificate files, reports ready (Istio's grpcready probe) once those exist, relays an
// app's ADS stream to the lab's server under the app's node id, rewrites the files on a
// renewal, refuses proxy operations with a reason, and removes its sockets at the end.
func TestProxylessAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodeID := "sidecar~10.244.0.7~echo-v1.default~default.svc.cluster.local"
	xdsSock, tokenPath := proxylessLab(t, dir, nodeID)
	runDir := filepath.Join(dir, "pod")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := Config{
		Lab: "t", Pod: "echo-v1", Namespace: "default", PodIP: netip.MustParseAddr("10.244.0.7"), NodeID: nodeID,
		ServiceCluster: "echo.default", Labels: map[string]string{"app": "echo"}, ServiceAccount: "echo",
		RunDir: runDir, XDSSocket: xdsSock, LabSocket: filepath.Join(dir, "api.sock"), TokenPath: tokenPath,
		Proxyless: true, StatusPort: freePort(t),
		// A proxy started by mistake would fail: nothing is at this path.
		ProxyPath: "/nonexistent/envoy",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, c, testutil.Logger(t), deps{launch: execLauncher{}, lookup: osLookup, listenHost: "127.0.0.1"})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("agent did not stop")
		}
	}
	t.Cleanup(stop)

	sock := unixClient(SocketPath(runDir))
	var st agentapi.Status
	eventually(t, "proxyless agent ready", func() error {
		var err error
		if st, err = getStatus(sock); err != nil {
			return err
		}
		if !st.Ready {
			return errors.New("not ready: " + st.Message)
		}
		return nil
	})
	if st.DataPlane != agentapi.DataPlaneProxyless || len(st.Epochs) != 0 || st.Proxyless == nil || st.Cert == nil {
		t.Fatalf("status: %+v, want a proxyless pod without epochs, with its bootstrap and certificate", st)
	}
	wantSock := filepath.Join(runDir, "istio-xds", "XDS")
	if st.Proxyless.Bootstrap != GRPCBootstrapPath(runDir) || st.Proxyless.XDSSocket != wantSock {
		t.Errorf("proxyless status %+v, want bootstrap %s and socket %s", st.Proxyless, GRPCBootstrapPath(runDir), wantSock)
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(int(c.StatusPort)) + "/healthz/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz/ready: %d, want 200", resp.StatusCode)
	}

	// The bootstrap names the XDS socket and the certificate files, which hold the pod's
	// identity.
	var boot struct {
		XDSServers []struct {
			ServerURI string `json:"server_uri"`
		} `json:"xds_servers"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
		CertProviders map[string]struct {
			Config map[string]string `json:"config"`
		} `json:"certificate_providers"`
	}
	b, err := os.ReadFile(GRPCBootstrapPath(runDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &boot); err != nil {
		t.Fatal(err)
	}
	if len(boot.XDSServers) != 1 || boot.XDSServers[0].ServerURI != "unix://"+wantSock || boot.Node.ID != nodeID {
		t.Errorf("bootstrap: %s", b)
	}
	certFile := boot.CertProviders["default"].Config["certificate_file"]
	if certFile != filepath.Join(GRPCCertDir(runDir), GRPCCertFile) {
		t.Errorf("bootstrap certificate_file %q, want it in %s", certFile, GRPCCertDir(runDir))
	}
	leaf := readLeaf(t, certFile)
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/default/sa/echo" {
		t.Errorf("certificate file's identity %v, want spiffe://cluster.local/ns/default/sa/echo", leaf.URIs)
	}
	if fi, err := os.Stat(filepath.Join(GRPCCertDir(runDir), GRPCKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v, want 0600", err, fi.Mode())
	}

	// An app's ADS stream through the XDS socket reaches the lab's server as its node.
	conn, err := grpc.NewClient("unix://"+wantSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	ads, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ads.Send(&discoverypb.DiscoveryRequest{Node: &corev3.Node{Id: nodeID}, TypeUrl: resource.ListenerType,
		ResourceNames: []string{"xds.istio.io/grpc/lds/inbound/0.0.0.0:17070"}}); err != nil {
		t.Fatal(err)
	}
	got, err := ads.Recv()
	if err != nil {
		t.Fatalf("relayed LDS: %v", err)
	}
	if got.GetVersionInfo() != "v1" || len(got.GetResources()) != 1 {
		t.Errorf("relayed LDS: version %q, %d resources, want v1 with the server listener", got.GetVersionInfo(), len(got.GetResources()))
	}
	st, err = getStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Proxyless.Relay; len(r.Streams) != 1 || r.Streams[0].Node != nodeID || r.Streams[0].Responses != 1 || r.Total != 1 {
		t.Errorf("relay status %+v, want one stream of %s with one response", r, nodeID)
	}
	scancel()

	// A renewal rewrites the files before it answers.
	code, body := do(t, sock, http.MethodPost, "/certs/renew")
	if code != http.StatusOK {
		t.Fatalf("renew: %d %s", code, body)
	}
	if renewed := readLeaf(t, certFile); renewed.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Errorf("the certificate file still holds serial %s after the renewal", leaf.SerialNumber)
	}
	// No proxy: the proxy operations say why.
	if code, body := do(t, sock, http.MethodPost, "/restart"); code != http.StatusConflict || !strings.Contains(body, "proxyless") {
		t.Errorf("restart: %d %s, want 409 saying the pod is proxyless", code, body)
	}

	stop()
	for _, p := range []string{wantSock, SocketPath(runDir)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after the agent stopped (stat: %v)", p, err)
		}
	}
}

// TestXDSProxyPassesRefusal: a stream the lab refuses ends for the app with the lab's
// status, not a generic error.
func TestXDSProxyPassesRefusal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up := filepath.Join(dir, "xds.sock")
	ln, err := net.Listen("unix", up)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	discoverypb.RegisterAggregatedDiscoveryServiceServer(g, refusingADS{})
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	p, err := newXDSProxy(up, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pln, err := net.Listen("unix", filepath.Join(dir, "XDS"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.serve(ctx, pln) }()
	defer func() { cancel(); <-served }()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "XDS"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ads, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ads.Send(&discoverypb.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "sidecar~10.0.0.9~other.default~default.svc.cluster.local"}}); err != nil {
		t.Fatal(err)
	}
	_, err = ads.Recv()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not this pod") {
		t.Errorf("refused stream: %v, want the lab's PermissionDenied", err)
	}
	if st := p.status(); !strings.Contains(st.LastError, "not this pod") || len(st.Streams) != 0 {
		t.Errorf("relay status %+v, want the refusal as last error and no open stream", st)
	}
}

type refusingADS struct {
	discoverypb.UnimplementedAggregatedDiscoveryServiceServer
}

func (refusingADS) DeltaAggregatedResources(s grpc.BidiStreamingServer[discoverypb.DeltaDiscoveryRequest, discoverypb.DeltaDiscoveryResponse]) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	return status.Error(codes.PermissionDenied, "node id is not this pod's")
}

func readLeaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func do(t *testing.T, c *http.Client, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://agent"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
