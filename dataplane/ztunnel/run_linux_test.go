package ztunnel

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	securitypb "istio.io/api/security/v1alpha1"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/ambientapi/zds"
	"github.com/meshlab/meshlab/dataplane/ztunnel/xdsclient"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

// fakeIstiod serves delta ADS and the CA on one unix socket, as the lab's xds.sock does.
type fakeIstiod struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	securitypb.UnimplementedIstioCertificateServiceServer
	ca       *testCA
	requests chan *discoveryv3.DeltaDiscoveryRequest
	auth     chan string
	streams  chan discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer
	impers   chan string
	stop     chan struct{}
}

func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (f *fakeIstiod) DeltaAggregatedResources(s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	f.auth <- bearer(s.Context())
	f.streams <- s
	for {
		req, err := s.Recv()
		if err != nil {
			return nil //nolint:nilerr // the client went away
		}
		select {
		case f.requests <- req:
		case <-f.stop:
			return nil
		}
	}
}

func (f *fakeIstiod) CreateCertificate(ctx context.Context, req *securitypb.IstioCertificateRequest) (*securitypb.IstioCertificateResponse, error) {
	id := req.GetMetadata().GetFields()["ImpersonatedIdentity"].GetStringValue()
	f.impers <- bearer(ctx) + " " + id
	chain, err := f.ca.Sign(ctx, []byte(req.GetCsr()), id, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &securitypb.IstioCertificateResponse{CertChain: chain}, nil
}

func addressResource(t *testing.T, a *workload.Address, name string) *discoveryv3.Resource {
	t.Helper()
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryv3.Resource{Name: name, Version: "v1", Resource: &anypb.Any{TypeUrl: xdsclient.AddressType, Value: b}}
}

// get fetches path from a server listening inside the namespace ns.
func get(t *testing.T, ns, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.DialContext(ctx, ns, network, addr)
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRun runs the whole process as the lab starts it: environment, WDS and the CA over
// one unix socket with ztunnel's token, ZDS from a fake node agent, admin and readiness
// in ztunnel's own namespace.
func TestRun(t *testing.T) {
	testutil.RequireRoot(t)
	l := newTestLab(t) // its pod a is what the node agent hands over
	zns := l.prefix + "-z"
	if err := netns.Create(zns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(zns) })
	run(t, "", "ip", "-n", zns, "link", "set", "lo", "up")

	dir := t.TempDir()
	ca := newTestCA(t)
	rootFile := filepath.Join(dir, "root-cert.pem")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(rootFile, []byte(ca.pemStr), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("ztunnel-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	xdsSock := filepath.Join(dir, "xds.sock")
	zdsSock := filepath.Join(dir, "ztunnel.sock")
	f := &fakeIstiod{
		ca: ca, requests: make(chan *discoveryv3.DeltaDiscoveryRequest, 64), auth: make(chan string, 4),
		streams: make(chan discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer, 4),
		impers:  make(chan string, 4), stop: make(chan struct{}),
	}
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, f)
	securitypb.RegisterIstioCertificateServiceServer(gs, f)
	gln, err := net.Listen("unix", xdsSock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(gln) }()
	defer gs.Stop()
	defer close(f.stop)
	zln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: zdsSock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer zln.Close()

	cfg, err := ConfigFromEnv([]string{
		"INPOD_UDS=" + zdsSock, "XDS_ADDRESS=unix://" + xdsSock, "CA_ADDRESS=unix://" + xdsSock,
		"NODE_NAME=ml-x-node", "POD_NAME=ztunnel-abcde", "POD_NAMESPACE=istio-system", "INSTANCE_IP=10.77.0.254",
		"CLUSTER_ID=Kubernetes", "TRUST_DOMAIN=cluster.local", "SERVICE_ACCOUNT=ztunnel",
		"MESHLAB_TOKEN_FILE=" + tokenFile, "MESHLAB_ROOT_CERT=" + rootFile, "ISTIO_META_DNS_CAPTURE=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- netns.Do(zns, func() error { return Run(ctx, cfg, Options{AccessLog: io.Discard}, testutil.Logger(t)) })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// WDS: ztunnel's node, token and wildcard subscriptions.
	if got := <-f.auth; got != "Bearer ztunnel-token" {
		t.Errorf("xds authorization = %q", got)
	}
	stream := <-f.streams
	first := <-f.requests
	if id := first.GetNode().GetId(); id != "ztunnel~10.77.0.254~ztunnel-abcde.istio-system~istio-system.svc.cluster.local" {
		t.Errorf("node id = %q", id)
	}
	md := first.GetNode().GetMetadata().GetFields()
	if md["NODE_NAME"].GetStringValue() != "ml-x-node" || md["NAMESPACE"].GetStringValue() != "istio-system" || md["DNS_CAPTURE"].GetStringValue() != "true" {
		t.Errorf("node metadata = %v", md)
	}
	types := map[string]bool{first.GetTypeUrl(): true}
	second := <-f.requests
	types[second.GetTypeUrl()] = true
	if !types[xdsclient.AddressType] || !types[xdsclient.AuthorizationType] || len(first.GetResourceNamesSubscribe())+len(second.GetResourceNamesSubscribe()) != 0 {
		t.Errorf("subscriptions: %v and %v, want Address and Authorization, wildcard", first, second)
	}
	if code, _ := get(t, zns, "http://127.0.0.1:15021/healthz/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("ready before WDS and ZDS: %d", code)
	}
	pod := wds("ml-x-node")[0]
	if err := stream.Send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: xdsclient.AddressType, Nonce: "n1",
		Resources: []*discoveryv3.Resource{addressResource(t, pod, pod.GetWorkload().GetUid())}}); err != nil {
		t.Fatal(err)
	}
	if ack := <-f.requests; ack.GetResponseNonce() != "n1" || ack.GetErrorDetail() != nil {
		t.Errorf("want the ACK of n1, got %v", ack)
	}
	bad := &discoveryv3.Resource{Name: "bad", Resource: &anypb.Any{TypeUrl: xdsclient.AddressType, Value: []byte{0xff, 0xff}}}
	if err := stream.Send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: xdsclient.AddressType, Nonce: "n2", Resources: []*discoveryv3.Resource{bad}}); err != nil {
		t.Fatal(err)
	}
	if nack := <-f.requests; nack.GetResponseNonce() != "n2" || nack.GetErrorDetail() == nil {
		t.Errorf("want the NACK of n2, got %v", nack)
	}
	if err := stream.Send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: xdsclient.AuthorizationType, Nonce: "n3"}); err != nil {
		t.Fatal(err)
	}
	<-f.requests

	// ZDS: the node agent hands pod a over.
	conn, err := zln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 1024)
	if _, err := conn.Read(buf); err != nil {
		t.Fatal(err)
	}
	nsf, err := os.Open(netns.Path(l.pods["a"]))
	if err != nil {
		t.Fatal(err)
	}
	defer nsf.Close()
	a := &agentConn{t: t, conn: conn}
	if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Add{Add: &zds.AddWorkload{Uid: "pod-a",
		WorkloadInfo: &zds.WorkloadInfo{Name: "a", Namespace: "default", ServiceAccount: "a"}}}}, int(nsf.Fd())); e != "" {
		t.Fatalf("add: %q", e)
	}
	if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_SnapshotSent{SnapshotSent: &zds.SnapshotSent{}}}, -1); e != "" {
		t.Fatalf("snapshot: %q", e)
	}
	select {
	case got := <-f.impers:
		if got != "Bearer ztunnel-token spiffe://cluster.local/ns/default/sa/a" {
			t.Errorf("CA request = %q, want ztunnel's token impersonating a", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no certificate asked for pod a")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := get(t, zns, "http://127.0.0.1:15021/healthz/ready")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, body := get(t, zns, "http://127.0.0.1:15000/config_dump")
	var dump struct {
		Workloads     []struct{ UID string }
		Certificates  []struct{ Identity, State string }
		WorkloadState map[string]struct{ State string }
	}
	if err := json.Unmarshal([]byte(body), &dump); err != nil {
		t.Fatalf("config_dump: %v\n%s", err, body)
	}
	if len(dump.Workloads) != 1 || dump.Workloads[0].UID != "Kubernetes//Pod/default/a" || dump.WorkloadState["pod-a"].State == "" {
		t.Errorf("config_dump: %s", body)
	}
	if !strings.Contains(body, "spiffe://cluster.local/ns/default/sa/a") {
		t.Errorf("config_dump lacks a's certificate:\n%s", body)
	}
	// The pod's sockets exist in its namespace.
	ss := run(t, "", "ip", "netns", "exec", l.pods["a"], "ss", "-Htln")
	for _, port := range []string{":15001", ":15006", ":15008", "127.0.0.1:15053"} {
		if !strings.Contains(ss, port) {
			t.Errorf("pod a has no listener on %s:\n%s", port, ss)
		}
	}

	// A new stream (istiod restarted) carries what ztunnel holds.
	stream2Done := make(chan struct{})
	go func() { gs.Stop(); close(stream2Done) }()
	<-stream2Done
	_ = unix.Unlink(xdsSock)
	gs2 := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs2, f)
	gln2, err := net.Listen("unix", xdsSock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs2.Serve(gln2) }()
	defer gs2.Stop()
	<-f.auth
	<-f.streams
	held := map[string]string{}
	for range 2 {
		select {
		case r := <-f.requests:
			for k, v := range r.GetInitialResourceVersions() {
				held[k] = v
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ztunnel did not reconnect")
		}
	}
	if held["Kubernetes//Pod/default/a"] != "v1" {
		t.Errorf("reconnect initial_resource_versions = %v, want a's v1", held)
	}
}

// agentConn is the node agent's side of ZDS for TestRun.
type agentConn struct {
	t    *testing.T
	conn *net.UnixConn
}

func (a *agentConn) send(req *zds.WorkloadRequest, fd int) string {
	a.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		a.t.Fatal(err)
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := a.conn.WriteMsgUnix(b, oob, nil); err != nil {
		a.t.Fatal(err)
	}
	buf := make([]byte, 1024)
	_ = a.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := a.conn.Read(buf)
	if err != nil {
		a.t.Fatal(err)
	}
	resp := &zds.WorkloadResponse{}
	if err := proto.Unmarshal(buf[:n], resp); err != nil {
		a.t.Fatal(err)
	}
	return resp.GetAck().GetError()
}
