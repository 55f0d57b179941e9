package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	securitypb "istio.io/api/security/v1alpha1"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios"
)

// impostorBootstrap is a sidecar bootstrap that speaks ADS as nodeID, to the lab's
// xds.sock (pipe) or a TCP address.
func impostorBootstrap(t *testing.T, dir, nodeID string, address map[string]any) string {
	t.Helper()
	boot := map[string]any{
		"node":  map[string]any{"id": nodeID, "cluster": "attacker.default"},
		"admin": map[string]any{"address": map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": 0}}},
		"dynamic_resources": map[string]any{
			"lds_config": map[string]any{"ads": map[string]any{}, "resource_api_version": "V3"},
			"cds_config": map[string]any{"ads": map[string]any{}, "resource_api_version": "V3"},
			"ads_config": map[string]any{
				"api_type": "GRPC", "transport_api_version": "V3", "set_node_on_first_message_only": true,
				"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "xds-grpc"}}},
			},
		},
		"static_resources": map[string]any{"clusters": []any{map[string]any{
			"name": "xds-grpc", "type": "STATIC", "connect_timeout": "1s",
			"load_assignment": map[string]any{"cluster_name": "xds-grpc", "endpoints": []any{map[string]any{
				"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{"address": address}}},
			}}},
			"typed_extension_protocol_options": map[string]any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
				"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
				"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}},
			}},
		}}},
	}
	b, err := json.Marshal(boot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("impostor-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runImpostor runs `meshlab proxy` with the bootstrap for a few seconds through prefix
// (nsenter, setpriv) and returns what it logged.
func runImpostor(t *testing.T, prefix []string, bootstrap string, baseID int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	argv := append(append([]string{}, prefix...), meshlabBin(t), "proxy", "-c", bootstrap, "--base-id", fmt.Sprint(baseID), "-l", "info")
	out, _ := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	return string(out)
}

// proxyStatusLines returns proxy-status's output.
func proxyStatus(t *testing.T, name string) string {
	t.Helper()
	out, err := meshlab(t, "proxy-status", "--name", name)
	if err != nil {
		t.Fatalf("proxy-status: %v\n%s", err, out)
	}
	return out
}

// TestXDSRefusesImpostors plays the attacks of issue 17 on the control plane: a proxy
// of one pod (uid 1337 in its network namespace) claiming another pod's node id on
// xds.sock, and another local user on the TCP listener, without a token, with another
// pod's token, or on the unix socket. Each is refused with a reason, nothing of it shows
// in proxy-status, and the real proxies stay SYNCED; the pod's own token works on TCP.
func TestXDSRefusesImpostors(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "--xds-listen", "127.0.0.1:0")
	paths := lab.PathsFor(lab.DefaultRunRoot, l.name)

	var st struct {
		Lab struct {
			XDSAddr string `json:"xdsAddr"`
		} `json:"lab"`
		Pods []struct {
			Name string `json:"name"`
			IP   string `json:"ip"`
		} `json:"pods"`
	}
	out, err := meshlab(t, "status", "--name", l.name, "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Lab.XDSAddr == "" {
		t.Fatalf("status -o json: %v, want the lab's xdsAddr:\n%s", err, out)
	}
	nodeID := map[string]string{}
	for _, p := range st.Pods {
		nodeID[p.Name] = fmt.Sprintf("sidecar~%s~%s.default~default.svc.cluster.local", p.IP, p.Name)
	}
	before := proxyStatus(t, l.name)
	if strings.Count(before, "SYNCED") == 0 {
		t.Fatalf("proxy-status before the attacks shows no SYNCED proxy:\n%s", before)
	}

	dir, err := os.MkdirTemp("", "meshlab-impostor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(st.Lab.XDSAddr, ":")
	var portNum int
	fmt.Sscan(port, &portNum)
	unixAddr := map[string]any{"pipe": map[string]any{"path": paths.XDSSocket()}}
	tcpAddr := map[string]any{"socket_address": map[string]any{"address": host, "port_value": portNum}}
	asProxyIn := func(pod string) []string {
		return []string{"nsenter", "--net=/run/netns/" + lab.NamespaceName(l.name, pod), "--", "setpriv", "--reuid=1337", "--regid=1337", "--clear-groups"}
	}
	asNobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}

	attacks := []struct {
		name   string
		prefix []string
		addr   map[string]any
		want   string
	}{
		{name: "frontend's proxy claims backend-v1 on xds.sock", prefix: asProxyIn("frontend-v1"), addr: unixAddr, want: "is not in the network namespace of pod default/backend-v1"},
		{name: "nobody on xds.sock", prefix: asNobody, addr: unixAddr, want: "permission denied"},
		{name: "nobody on TCP without a token", prefix: asNobody, addr: tcpAddr, want: "Unauthenticated"},
	}
	for i, a := range attacks {
		got := runImpostor(t, a.prefix, impostorBootstrap(t, dir, nodeID["backend-v1"], a.addr), 4242000+i)
		t.Logf("%s: %s", a.name, firstLineWith(got, a.want))
		if !strings.Contains(got, a.want) {
			t.Errorf("%s: the impostor's log does not say %q:\n%s", a.name, a.want, got)
		}
		if strings.Contains(got, "received") && strings.Contains(got, "virtualInbound") {
			t.Errorf("%s: the impostor received backend-v1's listeners:\n%s", a.name, got)
		}
	}

	// Over TCP with frontend's token, claiming backend-v1: refused; with backend-v1's
	// own token: served, as istiod serves a proxy presenting its JWT.
	readToken := func(pod string) string {
		b, err := os.ReadFile(filepath.Join(paths.PodDir(pod), "token"))
		if err != nil {
			t.Fatalf("read %s's token: %v", pod, err)
		}
		return strings.TrimSpace(string(b))
	}
	ads := func(token, node string) (*discoverypb.DiscoveryResponse, error) {
		conn, err := grpc.NewClient(st.Lab.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		s, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.Send(&discoverypb.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", Node: &core.Node{Id: node}}); err != nil {
			return nil, err
		}
		return s.Recv()
	}
	if _, err := ads(readToken("frontend-v1"), nodeID["backend-v1"]); err == nil || !strings.Contains(err.Error(), "PermissionDenied") {
		t.Errorf("TCP with frontend-v1's token as backend-v1: %v, want PermissionDenied", err)
	}
	if resp, err := ads(readToken("backend-v1"), nodeID["backend-v1"]); err != nil || len(resp.GetResources()) == 0 {
		t.Errorf("TCP with backend-v1's own token: %v (%d listeners), want its listeners", err, len(resp.GetResources()))
	}

	// Over TLS with backend-v1's workload certificate (issued by the lab's CA for its
	// token): served as backend-v1, refused as frontend-v1, as istiod checks a proxy's
	// certificate against its node.
	cert := workloadCertificate(t, st.Lab.XDSAddr, readToken("backend-v1"), "spiffe://cluster.local/ns/default/sa/backend")
	rootPEM, err := os.ReadFile(filepath.Join(paths.Dir, "ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	mtls := func(node string) (*discoverypb.DiscoveryResponse, error) {
		conn, err := grpc.NewClient(st.Lab.XDSAddr, grpc.WithTransportCredentials(credentials.NewTLS(spiffeTLS(t, rootPEM, cert,
			"spiffe://cluster.local/ns/istio-system/sa/istiod"))))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.Send(&discoverypb.DiscoveryRequest{TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", Node: &core.Node{Id: node}}); err != nil {
			return nil, err
		}
		return s.Recv()
	}
	if resp, err := mtls(nodeID["backend-v1"]); err != nil || len(resp.GetResources()) == 0 {
		t.Errorf("TLS with backend-v1's workload certificate: %v, want its listeners", err)
	}
	if _, err := mtls(nodeID["frontend-v1"]); err == nil || !strings.Contains(err.Error(), "is not the identity spiffe://cluster.local/ns/default/sa/frontend") {
		t.Errorf("TLS with backend-v1's certificate as frontend-v1: %v, want PermissionDenied naming the identities", err)
	}

	after := proxyStatus(t, l.name)
	if strings.Contains(after, "NACK") || strings.Contains(after, "attacker") || strings.Count(after, "SYNCED") < strings.Count(before, "SYNCED") {
		t.Errorf("proxy-status changed by the attacks:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !strings.Contains(l.out.String(), "xds stream refused") {
		t.Errorf("the lab logged no refused xds stream")
	}
	out, err = meshlab(t, "exec", "--name", l.name, "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/")
	if err != nil || !strings.Contains(out, "backend") {
		t.Errorf("request through the mesh after the attacks: %v\n%s", err, out)
	}
}

// firstLineWith returns the first line of s containing sub, or "".
func firstLineWith(s, sub string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// bigVirtualService is issue 17's probe: one VirtualService of n routes for backend, in
// block style as kubectl writes it.
func bigVirtualService(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  hosts:\n  - backend\n  http:\n", name)
	for i := range n {
		fmt.Fprintf(&b, "  - match:\n    - uri:\n        exact: /r%06d\n    route:\n    - destination:\n        host: backend\n", i)
	}
	b.WriteString("  - route:\n    - destination:\n        host: backend\n")
	return b.String()
}

// labRSS returns the resident memory of the lab process, in bytes.
func labRSS(t *testing.T, l *runningLab) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", l.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}

// settledRSS waits for the lab's background collection after a config change, then
// returns its RSS.
func settledRSS(t *testing.T, l *runningLab) int64 {
	t.Helper()
	time.Sleep(2 * time.Second)
	return labRSS(t, l)
}

// TestApplyLimits: the 10 MB VirtualService of issue 17 is refused with an error naming
// the file, object and field, nothing changes (every proxy stays SYNCED on its version),
// and the lab's memory comes back; a large valid VirtualService applies and reverts, and
// the memory it took is returned.
func TestApplyLimits(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	synced := func(when string) string {
		t.Helper()
		out := proxyStatus(t, l.name)
		lines := strings.Split(strings.TrimSpace(out), "\n")[1:]
		for _, line := range lines {
			if strings.Contains(line, "STALE") || strings.Contains(line, "NACK") || !strings.Contains(line, "SYNCED") {
				t.Fatalf("%s: a proxy is not SYNCED:\n%s", when, out)
			}
		}
		return out
	}
	before := synced("before")
	rss0 := settledRSS(t, l)

	huge := write("big.yaml", bigVirtualService("big", 127672))
	start := time.Now()
	out, err := meshlab(t, "apply", "--name", l.name, "-f", huge)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("apply of the 10 MB VirtualService succeeded:\n%s", out)
	}
	want := huge + ": VirtualService default/big: spec.http: "
	if !strings.Contains(out, want) || !strings.Contains(out, "above the limit of 1.5 MiB for one object") || strings.Count(out, "\n") > 3 {
		t.Errorf("apply error does not name the file, object and field (%q) in a line or two:\n%s", want, out)
	}
	t.Logf("refused in %v: %s", took, strings.TrimSpace(out))
	if after := synced("after the refused apply"); after != before {
		t.Errorf("proxy-status changed by a refused apply:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	rss1 := settledRSS(t, l)

	// A large but valid VirtualService (4,000 routes, about 400 KB) applies, is pushed
	// and ACKed, then is deleted.
	large := write("large.yaml", bigVirtualService("large", 4000))
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", large); err != nil || !strings.Contains(out, "created") {
		t.Fatalf("apply of 4,000 routes: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(proxyStatus(t, l.name), "STALE") && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	synced("after the large apply")
	rss2 := settledRSS(t, l)
	if out, err := meshlab(t, "delete", "--wait", "--name", l.name, "-f", large); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	rss3 := settledRSS(t, l)
	synced("after the revert")
	t.Logf("lab RSS: %d MiB at start, %d MiB after the refused 10 MB apply, %d MiB with 4,000 routes applied, %d MiB after their revert",
		rss0>>20, rss1>>20, rss2>>20, rss3>>20)
	// Refusing the probe reads it, splits it and scans it (about 100 MB of garbage); all
	// of it must be returned.
	if rss1-rss0 > 24<<20 {
		t.Errorf("refusing the 10 MB apply left the lab %d MiB larger", (rss1-rss0)>>20)
	}
	// The revert keeps the large version in the history (for meshlab diff), bounded by
	// discovery.DefaultHistoryBytes; the rest is returned.
	if rss3-rss0 > 64<<20 {
		t.Errorf("after the revert the lab is %d MiB larger than at start", (rss3-rss0)>>20)
	}
}

// TestUpRefusesOversizeScenario: `up` of the hello scenario with the 10 MB VirtualService
// refuses in a line naming the file, object and field, and creates nothing (the probe
// once brought a lab up with 0 of 3 pods ready and 127,673 error lines).
func TestUpRefusesOversizeScenario(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testutil.UniqueName(t)
	hello, _, err := scenarios.Lookup("hello")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "big-hello.yaml")
	if err := os.WriteFile(file, []byte(string(hello)+"\n---\n"+bigVirtualService("big", 127672)), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := meshlab(t, "up", "--name", name, file)
	if err == nil {
		t.Fatalf("meshlab up accepted the 10 MB VirtualService:\n%s", out)
	}
	if !strings.Contains(out, "big-hello.yaml: VirtualService default/big: spec.http: 127673 items") || strings.Count(out, "\n") > 3 {
		t.Errorf("up's error does not name the file, object and field in a line or two:\n%s", out)
	}
	t.Logf("refused in %v: %s", time.Since(start), strings.TrimSpace(out))
	assertNothingLeft(t, name)
}

// workloadCertificate asks the lab's CA on TCP, with a pod's token, for a certificate of
// the pod's identity, as the pod's agent does on xds.sock.
func workloadCertificate(t *testing.T, addr, token, spiffeID string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(spiffeID)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	resp, err := securitypb.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx, &securitypb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 3600,
	})
	if err != nil {
		t.Fatalf("CSR over TCP with the pod's token: %v", err)
	}
	cert := tls.Certificate{PrivateKey: key}
	for _, p := range resp.GetCertChain() {
		b, _ := pem.Decode([]byte(p))
		if b == nil {
			t.Fatalf("certificate chain entry is not PEM: %q", p)
		}
		cert.Certificate = append(cert.Certificate, b.Bytes)
	}
	return cert
}

// spiffeTLS is a client TLS config that presents cert and accepts only a server whose
// certificate chains to rootPEM and names serverID, as a proxy checks istiod.
func spiffeTLS(t *testing.T, rootPEM []byte, cert tls.Certificate, serverID string) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatal("no root certificate in ca-cert.pem")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		// The server's certificate names a SPIFFE ID, not a host: verified below.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			inter := x509.NewCertPool()
			for _, r := range raw[1:] {
				if c, err := x509.ParseCertificate(r); err == nil {
					inter.AddCert(c)
				}
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
				return err
			}
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != serverID {
				return fmt.Errorf("server certificate names %v, want %s", leaf.URIs, serverID)
			}
			return nil
		},
	}
}
