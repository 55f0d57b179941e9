package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/demoapp/grpcecho"
	"github.com/meshlab/meshlab/internal/testutil"
)

// grpcScenario is Istio's grpc-echo sample in a lab's form: service echo (grpc 7070 ->
// 17070) over echo-v1 and echo-v2 and a client, all injected with the grpc-agent
// template; extra documents are appended.
const grpcScenario = `apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{name: grpc, port: 7070, targetPort: 17070}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: client, annotations: {inject.istio.io/templates: grpc-agent}}
spec: {labels: {app: client}, serviceAccount: client, ports: [8080]}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: echo-v1, annotations: {inject.istio.io/templates: grpc-agent}}
spec: {labels: {app: echo, version: v1}, serviceAccount: echo, ports: [17070]}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: echo-v2, annotations: {inject.istio.io/templates: grpc-agent}}
spec: {labels: {app: echo, version: v2}, serviceAccount: echo, ports: [17070]}
`

const grpcSplit = `---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo}
spec:
  host: echo.default.svc.cluster.local
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo}
spec:
  hosts: [echo.default.svc.cluster.local]
  http:
  - route:
    - {destination: {host: echo.default.svc.cluster.local, subset: v1}, weight: 80}
    - {destination: {host: echo.default.svc.cluster.local, subset: v2}, weight: 20}
`

const grpcStrict = `---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo}
spec:
  host: echo.default.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
`

// TestProxylessGRPCWithGRPCGo runs grpc-go's own xDS client and xDS-enabled servers
// against meshlab's discovery server, as proxyless pods do: each with the bootstrap the
// agent writes (dataplane/agent) and its workload certificate from the lab's CA in the
// files of the bootstrap's file_watcher provider. The pods' addresses are on loopback
// (127.77.0.0/24), so no namespace is needed: this is the control plane's and the
// bootstrap's half of proxyless gRPC, with grpc-go as the judge of the resources.
// The client reaches both servers by xds:///echo.default.svc.cluster.local:7070; a
// VirtualService's 80/20 split between subsets is honoured; under STRICT mTLS with
// ISTIO_MUTUAL the server sees the client's SPIFFE identity, and a plaintext client is
// refused.
func TestProxylessGRPCWithGRPCGo(t *testing.T) {
	t.Parallel()
	build := func(extra string) *model.Model {
		t.Helper()
		s, err := config.Load("grpc.yaml", []byte(grpcScenario+extra))
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("127.77.0.0/24"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return m
	}
	m := build("")
	for _, p := range m.Pods {
		if !p.Sidecar.GRPCAgent {
			t.Fatalf("pod %s is not proxyless: the grpc-agent annotation was not read", p.Name)
		}
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "xds.sock")
	srv, err := discovery.New(discovery.Options{Logger: testutil.Logger(t), SocketPath: sock, SocketGID: -1})
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		stopRun()
		if err := <-runDone; err != nil {
			t.Errorf("discovery Run: %v", err)
		}
	})
	if err := srv.Update(ctx, m); err != nil {
		t.Fatalf("update: %v", err)
	}

	root, err := ca.NewRoot("cluster.local", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	authority, err := ca.New(ca.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	bootstraps := map[string][]byte{}
	for _, p := range m.Pods {
		certDir := filepath.Join(dir, p.Name)
		if err := os.MkdirAll(certDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeWorkloadCert(t, authority, certDir, p)
		b, err := agent.GRPCBootstrap(agent.GRPCBootstrapOptions{
			ServerURI: "unix://" + sock, NodeID: p.NodeID(), Namespace: p.Namespace, PodName: p.Name,
			InstanceIP: p.IP.String(), ServiceAccount: p.ServiceAccount, Labels: p.Labels, CertDir: certDir,
		})
		if err != nil {
			t.Fatal(err)
		}
		bootstraps[p.Name] = b
	}
	for _, name := range []string{"echo-v1", "echo-v2"} {
		p := m.Pod(name)
		s, err := grpcecho.NewServer(grpcecho.Options{Pod: name, Bootstrap: bootstraps[name]})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(p.IP.String(), "17070"))
		if err != nil {
			t.Fatalf("listen for %s: %v", name, err)
		}
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Stop)
	}

	const target = "xds:///echo.default.svc.cluster.local:7070"
	call := func(what string, n int) map[string]int {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		replies, err := grpcecho.Call(cctx, target, n, grpcecho.Options{Bootstrap: bootstraps["client"]})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := map[string]int{}
		for _, r := range replies {
			if r.Code != codes.OK {
				t.Fatalf("%s: a call failed: %s", what, r.Err)
			}
			got[r.Pod+" "+r.Peer]++
		}
		t.Logf("%s: %v", what, got)
		return got
	}

	// eventually calls until ok holds of one batch's answers, or 20 s pass: a client's
	// first calls go to the first server its connection reached, and servers take new
	// listeners asynchronously.
	eventually := func(what string, n int, ok func(map[string]int) bool) map[string]int {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := call(what, n)
			if ok(got) || time.Now().After(deadline) {
				return got
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Plaintext (no PeerAuthentication: gRPC's PERMISSIVE is plaintext), both pods.
	got := eventually("no routing rules", 40, func(got map[string]int) bool { return got["echo-v1 none"] > 0 && got["echo-v2 none"] > 0 })
	if got["echo-v1 none"] == 0 || got["echo-v2 none"] == 0 || len(got) != 2 {
		t.Errorf("no routing rules: answers %v, want both pods over plaintext", got)
	}

	// The VirtualService's 80/20 split between subsets.
	if err := srv.Update(ctx, build(grpcSplit)); err != nil {
		t.Fatalf("update: %v", err)
	}
	got = call("80/20 split", 200)
	if v1 := got["echo-v1 none"]; v1 < 140 || v1 > 185 || got["echo-v1 none"]+got["echo-v2 none"] != 200 {
		t.Errorf("80/20 split: answers %v, want about 160 from echo-v1 and 40 from echo-v2", got)
	}

	// STRICT mTLS: the server sees the client's identity; plaintext is refused.
	if err := srv.Update(ctx, build(grpcStrict)); err != nil {
		t.Fatalf("update: %v", err)
	}
	clientID := (&url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/default/sa/client"}).String()
	got = eventually("STRICT with ISTIO_MUTUAL", 20, func(got map[string]int) bool {
		return got["echo-v1 "+clientID] > 0 && got["echo-v2 "+clientID] > 0
	})
	if got["echo-v1 "+clientID] == 0 || got["echo-v2 "+clientID] == 0 {
		t.Errorf("STRICT: answers %v, want both pods seeing %s", got, clientID)
	}
	conn, err := grpc.NewClient(net.JoinHostPort(m.Pod("echo-v1").IP.String(), "17070"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	_, err = healthpb.NewHealthClient(conn).Check(pctx, &healthpb.HealthCheckRequest{})
	if err == nil || (status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded) {
		t.Errorf("plaintext call under STRICT: %v, want it refused", err)
	}
}

// writeWorkloadCert writes pod p's workload certificate from authority into dir, as the
// agent writes it for the file_watcher provider.
func writeWorkloadCert(t *testing.T, authority *ca.CA, dir string, p *model.Pod) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := ca.Identity{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}
	u, _ := url.Parse(id.SPIFFEID(authority.TrustDomain()))
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{}, URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := authority.Sign(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}), id, time.Hour)
	if err != nil {
		t.Fatalf("sign %s: %v", p.Name, err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, roots := strings.Join(chain[:len(chain)-1], ""), chain[len(chain)-1]
	if err := agent.WriteGRPCCerts(dir, []byte(leaf), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), []byte(roots), -1); err != nil {
		t.Fatal(err)
	}
}
