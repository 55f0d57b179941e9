package admin

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/internal/testutil"
)

// fakeState is a bookinfo-like ambient lab: two HBONE pods, a TCP pod, a waypoint, two
// services, policies and certificates.
type fakeState struct {
	ws    []*workload.Workload
	ss    []*workload.Service
	ps    []*security.Authorization
	certs []Certificate
	pods  map[string]Pod
}

func (f *fakeState) Workloads() []*workload.Workload     { return f.ws }
func (f *fakeState) Services() []*workload.Service       { return f.ss }
func (f *fakeState) Policies() []*security.Authorization { return f.ps }
func (f *fakeState) Certificates() []Certificate         { return f.certs }
func (f *fakeState) Pods() map[string]Pod                { return f.pods }

var _ State = (*fakeState)(nil)

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

func cert(tb testing.TB, serial int64, cn string, uri string, parent *x509.Certificate, key ed25519.PrivateKey) *x509.Certificate {
	tb.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Date(2026, 11, 28, 16, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC),
	}
	if uri != "" {
		u, err := url.Parse(uri)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		parent = tmpl
	}
	der, err := x509.CreateCertificate(nil, tmpl, parent, key.Public(), key)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func bookinfo(tb testing.TB) *fakeState {
	tb.Helper()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	root := cert(tb, 1, "meshlab root", "", nil, key)
	leaf := cert(tb, 123456789012345, "", "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", root, key)
	ports := func(pp ...uint32) *workload.PortList {
		pl := &workload.PortList{}
		for i := 0; i < len(pp); i += 2 {
			pl.Ports = append(pl.Ports, &workload.Port{ServicePort: pp[i], TargetPort: pp[i+1]})
		}
		return pl
	}
	waypoint := &workload.GatewayAddress{
		Destination:   &workload.GatewayAddress_Hostname{Hostname: &workload.NamespacedHostname{Namespace: "default", Hostname: "waypoint.default.svc.cluster.local"}},
		HboneMtlsPort: 15008,
	}
	return &fakeState{
		ws: []*workload.Workload{
			{
				Uid: "Kubernetes//Pod/default/reviews-v1-0", Name: "reviews-v1-0", Namespace: "default", Addresses: [][]byte{ip("10.10.0.12")},
				TunnelProtocol: workload.TunnelProtocol_HBONE, ServiceAccount: "bookinfo-reviews", Node: "ml-lab-node",
				WorkloadName: "reviews-v1", CanonicalName: "reviews", CanonicalRevision: "v1", WorkloadType: workload.WorkloadType_POD,
				Services: map[string]*workload.PortList{"default/reviews.default.svc.cluster.local": ports(9080, 9080)},
				Waypoint: waypoint, ClusterId: "Kubernetes",
			},
			{
				Uid: "Kubernetes//Pod/default/productpage-v1-0", Name: "productpage-v1-0", Namespace: "default", Addresses: [][]byte{ip("10.10.0.11")},
				TunnelProtocol: workload.TunnelProtocol_HBONE, ServiceAccount: "bookinfo-productpage", Node: "ml-lab-node",
				WorkloadName: "productpage-v1", CanonicalName: "productpage", CanonicalRevision: "v1",
				Services:              map[string]*workload.PortList{"default/productpage.default.svc.cluster.local": ports(9080, 9080)},
				AuthorizationPolicies: []string{"istio-system/istio_converted_static_strict"}, ClusterId: "Kubernetes",
				Locality: &workload.Locality{Region: "lab", Zone: "a"},
			},
			{
				Uid: "Kubernetes//Pod/legacy/curl-0", Name: "curl-0", Namespace: "legacy", Addresses: [][]byte{ip("10.10.0.20")},
				ServiceAccount: "curl", Node: "ml-lab-node", WorkloadName: "curl", CanonicalName: "curl", CanonicalRevision: "latest",
				Status: workload.WorkloadStatus_UNHEALTHY,
			},
		},
		ss: []*workload.Service{
			{
				Name: "reviews", Namespace: "default", Hostname: "reviews.default.svc.cluster.local",
				Addresses:       []*workload.NetworkAddress{{Address: ip("10.96.0.12")}},
				Ports:           []*workload.Port{{ServicePort: 9080, TargetPort: 9080}},
				SubjectAltNames: []string{"spiffe://cluster.local/ns/default/sa/bookinfo-reviews"},
				Waypoint:        waypoint,
			},
			{
				Name: "productpage", Namespace: "default", Hostname: "productpage.default.svc.cluster.local",
				Addresses:     []*workload.NetworkAddress{{Address: ip("10.96.0.11")}},
				Ports:         []*workload.Port{{ServicePort: 9080, TargetPort: 9080}},
				LoadBalancing: &workload.LoadBalancing{RoutingPreference: []workload.LoadBalancing_Scope{workload.LoadBalancing_NETWORK, workload.LoadBalancing_ZONE}, Mode: workload.LoadBalancing_FAILOVER},
				IpFamilies:    workload.IPFamilies_IPV4_ONLY,
			},
		},
		ps: []*security.Authorization{
			{
				Name: "istio_converted_static_strict", Namespace: "istio-system", Scope: security.Scope_WORKLOAD_SELECTOR, Action: security.Action_DENY,
				Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{NotPrincipals: []*security.StringMatch{{MatchType: &security.StringMatch_Presence{Presence: &emptypb.Empty{}}}}}}}}}},
			},
			{
				Name: "productpage-viewer", Namespace: "default", Scope: security.Scope_NAMESPACE, Action: security.Action_ALLOW,
				Groups: []*security.Group{{Rules: []*security.Rules{
					{Matches: []*security.Match{{Principals: []*security.StringMatch{{MatchType: &security.StringMatch_Exact{Exact: "cluster.local/ns/default/sa/curl"}}}, SourceIps: []*security.Address{{Address: ip("10.10.0.0"), Length: 16}}}}},
					{Matches: []*security.Match{{DestinationPorts: []uint32{9080}, ServiceAccounts: []*security.ServiceAccountMatch{{Namespace: "default", ServiceAccount: "curl"}}}}},
				}}},
			},
			{Name: "audit", Namespace: "default", Scope: security.Scope_GLOBAL, Action: security.Action_DENY, DryRun: true},
		},
		certs: []Certificate{
			{Identity: "spiffe://cluster.local/ns/default/sa/bookinfo-reviews", State: CertInitializing},
			{Identity: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", State: CertAvailable, Chain: []*x509.Certificate{leaf}, Roots: []*x509.Certificate{root}},
			{Identity: "spiffe://cluster.local/ns/legacy/sa/x", State: Unavailable(errors.New("CA unreachable"))},
		},
		pods: map[string]Pod{
			"uid-productpage": {
				State: PodUp, Name: "productpage-v1-0", Namespace: "default", ServiceAccount: "bookinfo-productpage",
				Inbound: []Connection{{Src: netip.MustParseAddrPort("10.10.0.20:40000"), ActualDst: netip.MustParseAddrPort("10.10.0.11:9080"), Protocol: "TCP"}},
				Outbound: []Connection{{
					Src: netip.MustParseAddrPort("10.10.0.11:41000"), OriginalDst: netip.MustParseAddrPort("10.96.0.12:9080"),
					ActualDst: netip.MustParseAddrPort("10.10.0.12:15008"), Protocol: "HBONE",
				}},
			},
			"uid-reviews": {State: PodPending, Name: "reviews-v1-0", Namespace: "default", ServiceAccount: "bookinfo-reviews"},
		},
	}
}

// TestConfigDumpGolden is ztunnel's /config_dump for the fixture. Its golden file is also
// the input of dataplane/ztunnelconfig's tests and of the fidelity module's comparison with
// istioctl's own ztunnel writer.
func TestConfigDumpGolden(t *testing.T) {
	t.Parallel()
	body, err := ConfigDump(bookinfo(t), map[string]any{"proxyMode": "Shared", "clusterId": "Kubernetes"}, Build{Version: "meshlab", IstioVersion: "1.28"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "config_dump", append(body, '\n'))

	var dump struct {
		Workloads []struct {
			UID, Protocol, TrustDomain, ServiceAccount, WorkloadType, Status string
			WorkloadIPs                                                      []string
			Waypoint                                                         *struct{ Destination string }
		}
		Services []struct {
			Hostname  string
			Vips      []string
			Endpoints map[string]struct{ WorkloadUID string }
		}
		Policies []struct {
			Name, Scope, Action string
			Rules               [][][]map[string]json.RawMessage
		}
		Certificates  []struct{ Identity, State string }
		WorkloadState map[string]struct {
			State       string
			Connections *struct {
				Outbound []struct{ OriginalDst, Protocol string }
			}
		}
	}
	if err := json.Unmarshal(body, &dump); err != nil {
		t.Fatal(err)
	}
	if len(dump.Workloads) != 3 || dump.Workloads[0].UID != "Kubernetes//Pod/default/productpage-v1-0" {
		t.Fatalf("workloads not sorted by uid: %+v", dump.Workloads)
	}
	w := dump.Workloads[1]
	if w.Protocol != "HBONE" || w.WorkloadType != "pod" || w.TrustDomain != "cluster.local" || w.Waypoint == nil || w.Waypoint.Destination != "default/waypoint.default.svc.cluster.local" {
		t.Errorf("reviews workload = %+v", w)
	}
	if c := dump.Workloads[2]; c.Protocol != "TCP" || c.Status != "Unhealthy" || c.WorkloadIPs[0] != "10.10.0.20" {
		t.Errorf("curl workload = %+v", c)
	}
	if s := dump.Services[0]; s.Hostname != "productpage.default.svc.cluster.local" || s.Vips[0] != "/10.96.0.11" || s.Endpoints["Kubernetes//Pod/default/productpage-v1-0"].WorkloadUID == "" {
		t.Errorf("productpage service = %+v", s)
	}
	if len(dump.Policies) != 3 || dump.Policies[0].Name != "audit" || dump.Policies[2].Scope != "WorkloadSelector" || dump.Policies[2].Action != "Deny" {
		t.Errorf("policies = %+v", dump.Policies)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, dump.Policies[2].Rules[0][0][0]["notPrincipals"])
	if got := compact.String(); got != `[{"Presence":[]}]` {
		t.Errorf("STRICT's notPrincipals = %s", got)
	}
	if dump.Certificates[0].Identity != "spiffe://cluster.local/ns/default/sa/bookinfo-productpage" || dump.Certificates[2].State != "Unavailable: CA unreachable" {
		t.Errorf("certificates = %+v", dump.Certificates)
	}
	if up := dump.WorkloadState["uid-productpage"]; up.State != "Up" || up.Connections.Outbound[0].Protocol != "HBONE" {
		t.Errorf("workloadState = %+v", dump.WorkloadState)
	}
	if p := dump.WorkloadState["uid-reviews"]; p.State != "Pending" || p.Connections != nil {
		t.Errorf("pending pod = %+v", p)
	}
}

func do(t *testing.T, h http.Handler, method, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestHandler(t *testing.T) {
	t.Parallel()
	lv := &slog.LevelVar{}
	quit := 0
	ready := false
	h := Handler(Options{State: bookinfo(t), Level: lv, Shutdown: func() { quit++ }, Ready: func() bool { return ready }})
	cases := []struct {
		method, target string
		code           int
		body           string
	}{
		{"GET", "/config_dump", 200, `"workloads": [`},
		{"GET", "/logging", 405, "Invalid HTTP method"},
		{"POST", "/logging", 200, "current log level is info\n"},
		{"POST", "/logging?level=debug", 200, "current log level is debug\n"},
		{"POST", "/logging?level=ztunnel::proxy=trace", 200, "current log level is debug\n"},
		{"POST", "/logging?level=loud", 400, "Invalid level provided: loud"},
		{"POST", "/logging?reset", 200, "current log level is info\n"},
		{"POST", "/logging?level=off", 200, "current log level is off\n"},
		{"GET", "/healthz/ready", 503, "not ready"},
		{"GET", "/quitquitquit", 405, ""},
		{"POST", "/quitquitquit", 200, "shutdown now\n"},
		{"GET", "/", 200, "config_dump"},
		{"GET", "/nothing", 404, ""},
	}
	for _, tc := range cases {
		code, body := do(t, h, tc.method, tc.target)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s %s = %d %q, want %d containing %q", tc.method, tc.target, code, body, tc.code, tc.body)
		}
	}
	if quit != 1 {
		t.Errorf("Shutdown called %d times, want 1", quit)
	}
	ready = true
	if code, _ := do(t, h, "GET", "/healthz/ready"); code != 200 {
		t.Errorf("ready: %d", code)
	}
}
