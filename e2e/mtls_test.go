package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/statstext"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// meshLab is a running testdata/mtls.yaml lab with a client per pod namespace.
type meshLab struct {
	*runningLab
	api     *api.Client
	pods    map[string]api.PodStatus
	clients map[string]*http.Client
	vips    map[string]string // service name -> VIP
}

func startMTLSLab(t *testing.T) *meshLab {
	t.Helper()
	l := startLab(t, "testdata/mtls.yaml")
	m := &meshLab{runningLab: l, pods: map[string]api.PodStatus{}, clients: map[string]*http.Client{}, vips: map[string]string{}}
	m.api = api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(m.api.Close)
	pods, err := m.api.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		m.pods[p.Name] = p
		c := podClient(p.NetNS)
		c.Transport.(*http.Transport).DisableKeepAlives = true // each request is a new handshake
		m.clients[p.Name] = c
		t.Cleanup(c.CloseIdleConnections)
	}
	var topo api.Topology
	apiGet(t, l.name, "/v1/topology", &topo)
	for _, s := range topo.Services {
		m.vips[s.Name] = s.VIP.String()
	}
	return m
}

// demoReply is the part of the demo app's answer these tests read.
type demoReply struct {
	Pod     string            `json:"pod"`
	Headers map[string]string `json:"headers"`
}

// get sends one GET from pod to url and returns the status, the demo app's answer (when
// the status is 200) and the raw body.
func (m *meshLab) get(ctx context.Context, pod, url string) (int, demoReply, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, demoReply{}, "", err
	}
	resp, err := m.clients[pod].Do(req)
	if err != nil {
		return 0, demoReply{}, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, demoReply{}, "", err
	}
	var r demoReply
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &r); err != nil {
			return resp.StatusCode, r, string(body), fmt.Errorf("not the demo app's answer: %w: %s", err, body)
		}
	}
	return resp.StatusCode, r, string(body), nil
}

// xfcc returns the x-forwarded-client-cert header the demo app saw.
func (r demoReply) xfcc() string {
	for k, v := range r.Headers {
		if strings.EqualFold(k, "x-forwarded-client-cert") {
			return v
		}
	}
	return ""
}

// apply applies yaml with `meshlab apply -f` and waits until some sidecar got a new LDS
// version and every sidecar ACKed what it was sent (the lab pushes before apply returns,
// and only to the proxies whose config changed).
func (m *meshLab) apply(t *testing.T, yaml string) {
	t.Helper()
	before, err := m.api.ProxyStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lds := map[string]string{}
	for _, ps := range before {
		lds[ps.Pod] = ps.Types["LDS"].Acked
	}
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := meshlab(t, "apply", "--wait", "--name", m.name, "-f", file); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := m.api.ProxyStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		synced, changed := len(st) == len(before), false
		for _, ps := range st {
			for _, typ := range []string{"CDS", "LDS", "EDS", "RDS"} {
				synced = synced && ps.Types[typ].State() == "SYNCED"
			}
			changed = changed || ps.Types["LDS"].Acked != lds[ps.Pod]
		}
		if synced && changed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxies not SYNCED on a new LDS version 20s after apply: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyStat reads one counter from pod's sidecar admin API (/stats, Envoy's text format).
func (m *meshLab) proxyStat(t *testing.T, pod, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:15000/stats?filter="+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.clients[pod].Do(req)
	if err != nil {
		t.Fatalf("stats of %s: %v", pod, err)
	}
	defer resp.Body.Close()
	vals, err := statstext.ParseValues(resp.Body)
	if err != nil {
		t.Fatalf("stats of %s: %v", pod, err)
	}
	return int(vals[name])
}

const (
	frontendID = "spiffe://cluster.local/ns/default/sa/frontend"
	backendID  = "spiffe://cluster.local/ns/default/sa/backend"
)

// TestMutualTLSModes walks a namespace from PERMISSIVE (the default) to STRICT and then
// DISABLE for one workload, checking at each step who can talk to the backend and whether
// the sidecars used mTLS (the backend's app sees x-forwarded-client-cert naming both
// identities only when its sidecar terminated mTLS).
func TestMutualTLSModes(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	m := startMTLSLab(t)
	ctx := t.Context()
	viaMesh := "http://" + net.JoinHostPort(m.vips["backend"], "8080") + "/"
	viaTCP := "http://" + net.JoinHostPort(m.vips["backend-tcp"], "9090") + "/"
	direct := "http://" + net.JoinHostPort(m.pods["backend-v1"].IP.String(), "8080") + "/"

	// PERMISSIVE: sidecar to sidecar is mTLS; the legacy pod's plaintext is accepted.
	code, r, body, err := m.get(ctx, "frontend-v1", viaMesh)
	if err != nil || code != 200 {
		t.Fatalf("frontend -> backend under PERMISSIVE: %d %v %s", code, err, body)
	}
	if x := r.xfcc(); !strings.Contains(x, "By="+backendID) || !strings.Contains(x, "URI="+frontendID) {
		t.Errorf("frontend -> backend under PERMISSIVE: x-forwarded-client-cert %q, want By=%s and URI=%s (mTLS)", x, backendID, frontendID)
	}
	if code, r, body, err := m.get(ctx, "legacy", direct); err != nil || code != 200 || r.xfcc() != "" {
		t.Errorf("legacy (no sidecar) -> backend under PERMISSIVE: %d %v xfcc %q %s; want 200 in plaintext", code, err, r.xfcc(), body)
	}

	// STRICT: plaintext is refused at the backend's sidecar; mTLS still works, for HTTP and TCP.
	m.apply(t, `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: STRICT}
`)
	if code, _, body, err := m.get(ctx, "legacy", direct); err == nil {
		t.Errorf("legacy (no sidecar) -> backend under STRICT: got %d %s, want the connection refused", code, body)
	} else {
		t.Logf("legacy under STRICT, as expected: %v", err)
	}
	if code, r, body, err := m.get(ctx, "frontend-v1", viaMesh); err != nil || code != 200 || !strings.Contains(r.xfcc(), "URI="+frontendID) {
		t.Errorf("frontend -> backend under STRICT: %d %v xfcc %q %s; want 200 over mTLS", code, err, r.xfcc(), body)
	}
	if code, _, body, err := m.get(ctx, "frontend-v1", viaTCP); err != nil || code != 200 {
		t.Errorf("frontend -> backend-tcp under STRICT: %d %v %s; want 200 (tcp_proxy over mTLS)", code, err, body)
	}

	// DISABLE for the backend workload: auto-mTLS sees it and the frontend's sidecar sends
	// plaintext; the legacy pod gets in again.
	m.apply(t, `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: backend-plaintext, namespace: default}
spec:
  selector:
    matchLabels: {app: backend}
  mtls: {mode: DISABLE}
`)
	if code, r, body, err := m.get(ctx, "frontend-v1", viaMesh); err != nil || code != 200 || r.xfcc() != "" {
		t.Errorf("frontend -> backend under DISABLE: %d %v xfcc %q %s; want 200 in plaintext", code, err, r.xfcc(), body)
	}
	if code, _, body, err := m.get(ctx, "legacy", direct); err != nil || code != 200 {
		t.Errorf("legacy -> backend under DISABLE: %d %v %s; want 200", code, err, body)
	}
}

// TestAuthorizationPolicyDeny: a DENY policy answers 403 from the backend's sidecar for
// the matching requests only, and counts them in rbac.denied.
func TestAuthorizationPolicyDeny(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	m := startMTLSLab(t)
	ctx := t.Context()
	base := "http://" + net.JoinHostPort(m.vips["backend"], "8080")

	m.apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: no-admin, namespace: default}
spec:
  selector:
    matchLabels: {app: backend}
  action: DENY
  rules:
    - from:
        - source: {principals: ["cluster.local/ns/default/sa/frontend"]}
      to:
        - operation: {paths: ["/admin*"]}
`)
	if code, _, body, err := m.get(ctx, "frontend-v1", base+"/admin/users"); err != nil || code != 403 || body != "RBAC: access denied" {
		t.Errorf("frontend GET /admin/users: %d %v %q; want 403 \"RBAC: access denied\"", code, err, body)
	}
	if code, _, body, err := m.get(ctx, "frontend-v1", base+"/"); err != nil || code != 200 {
		t.Errorf("frontend GET /: %d %v %s; want 200", code, err, body)
	}
	denied := 0
	for _, name := range []string{"http.inbound_0.0.0.0_8080.rbac.denied", "http.inbound_0.0.0.0_8080;.rbac.denied"} {
		denied += m.proxyStat(t, "backend-v1", name)
	}
	if denied != 1 {
		t.Errorf("backend's sidecar rbac.denied = %d, want 1", denied)
	}

	// An ALLOW policy that admits only the frontend shuts the legacy pod out even in
	// PERMISSIVE mode: its plaintext requests carry no identity.
	m.apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: frontend-only, namespace: default}
spec:
  selector:
    matchLabels: {app: backend}
  action: ALLOW
  rules:
    - from:
        - source: {principals: ["cluster.local/ns/default/sa/frontend"]}
`)
	direct := "http://" + net.JoinHostPort(m.pods["backend-v1"].IP.String(), "8080") + "/"
	if code, _, body, err := m.get(ctx, "legacy", direct); err != nil || code != 403 {
		t.Errorf("legacy GET / under ALLOW frontend-only: %d %v %s; want 403", code, err, body)
	}
	if code, _, body, err := m.get(ctx, "frontend-v1", base+"/"); err != nil || code != 200 {
		t.Errorf("frontend GET / under ALLOW frontend-only: %d %v %s; want 200", code, err, body)
	}

	// Changing the policy reaches the connection the frontend's sidecar already pools to
	// the backend: the backend's sidecar drains connections of the listener it replaced.
	m.apply(t, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: frontend-only, namespace: default}
spec:
  selector:
    matchLabels: {app: backend}
  action: ALLOW
  rules:
    - from:
        - source: {principals: ["cluster.local/ns/default/sa/legacy"]}
`)
	if code, _, body, err := m.get(ctx, "frontend-v1", base+"/"); err != nil || code != 403 {
		t.Errorf("frontend GET / once the policy admits only legacy: %d %v %s; want 403", code, err, body)
	}
}
