package rbac

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/envoylog"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// dryRunPolicy is the authz-dry-run page's deny-path-headers as istiod builds it: a DENY
// rule set with one policy matching path /headers.
const dryRunPolicy = "ns[foo]-policy[deny-path-headers]-rule[0]"

func denyHeaders() *rbacv3.RBAC {
	path := &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
		Rule: &matcherv3.PathMatcher_Path{Path: exact("/headers")}}}}
	return &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{
		dryRunPolicy: {Permissions: []*rbacv3.Permission{path}, Principals: []*rbacv3.Principal{anyID}},
	}}
}

// rbacLogger returns a logger writing Envoy-shaped lines of logger rbac at level.
func rbacLogger(level slog.Level) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	lv := envoylog.NewLevels(slog.LevelInfo)
	if err := lv.Set(LoggerName, level); err != nil {
		panic(err)
	}
	return slog.New(envoylog.NewHandler(&buf, lv, 1)).With("component", LoggerName), &buf
}

func str(md map[string]*structpb.Value, k string) string { return md[k].GetStringValue() }

// A dry-run DENY policy is Envoy's shadow rules: the request it matches is allowed and
// reported as shadow denied (the stat Istio's tags split into authz_dry_run_action and
// authz_dry_run_result, the dynamic metadata Istio's tracing tags read, the rbac debug
// line the authz-dry-run page greps); one it does not match is shadow allowed with no
// policy. Without enforced rules Envoy says so.
func TestShadowRulesReportWithoutEnforcing(t *testing.T) {
	cfg, err := CompileHTTP(mustAny(t, &httprbacv3.RBAC{ShadowRules: denyHeaders(), ShadowRulesStatPrefix: "istio_dry_run_deny_"}))
	if err != nil {
		t.Fatal(err)
	}
	st := stats.NewStore()
	log, buf := rbacLogger(slog.LevelDebug)
	res := cfg.HTTPStats(st.HTTP("inbound_0.0.0.0_8080")).Check(&cfg.Rules, input("", map[string]string{":path": "/headers", ":method": "GET"}), log)
	if !res.Allowed || res.Policy != "" {
		t.Fatalf("dry-run deny: %+v, want allowed by no enforced policy", res)
	}
	if got := str(res.Metadata, "istio_dry_run_deny_shadow_engine_result"); got != "denied" {
		t.Errorf("shadow_engine_result = %q, want denied (metadata %v)", got, res.Metadata)
	}
	if got := str(res.Metadata, "istio_dry_run_deny_shadow_effective_policy_id"); got != dryRunPolicy {
		t.Errorf("shadow_effective_policy_id = %q", got)
	}
	if _, ok := res.Metadata["enforced_engine_result"]; ok {
		t.Error("enforced result reported without enforced rules")
	}
	for name, want := range map[string]int64{
		"http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_.shadow_denied":  1,
		"http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_.shadow_allowed": 0,
		"http.inbound_0.0.0.0_8080.rbac.allowed":                            0,
		"http.inbound_0.0.0.0_8080.rbac.denied":                             0,
	} {
		if _, ok := st.Lookup(name); !ok {
			t.Errorf("%s does not exist (Envoy creates it with the filter)", name)
		}
		if got := st.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	logged := buf.String()
	for _, want := range []string{
		"[debug][rbac] checking request: requestedServerName: , sourceIP: 10.0.0.1:40000, directRemoteIP: 10.0.0.1:40000, remoteIP: 10.0.0.1:40000,localAddress: 10.0.0.2:8080, ssl: none, headers: ",
		"[debug][rbac] shadow denied, matched policy " + dryRunPolicy + "\n",
		"[debug][rbac] no engine, allowed by default\n",
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("rbac log lacks %q:\n%s", want, logged)
		}
	}

	buf.Reset()
	res = cfg.HTTPStats(st.HTTP("inbound_0.0.0.0_8080")).Check(&cfg.Rules, input("", map[string]string{":path": "/ip"}), log)
	if !res.Allowed || str(res.Metadata, "istio_dry_run_deny_shadow_engine_result") != "allowed" {
		t.Fatalf("/ip: %+v", res)
	}
	if _, ok := res.Metadata["istio_dry_run_deny_shadow_effective_policy_id"]; ok {
		t.Error("a policy id reported when no shadow policy matched")
	}
	if !strings.Contains(buf.String(), "shadow allowed, matched policy none\n") {
		t.Errorf("rbac log:\n%s", buf.String())
	}
	if got := st.Value("http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_.shadow_allowed"); got != 1 {
		t.Errorf("shadow_allowed = %d", got)
	}

	// At rbac's default level (info) nothing is logged.
	quiet, qbuf := rbacLogger(slog.LevelInfo)
	cfg.HTTPStats(st.HTTP("inbound_0.0.0.0_8080")).Check(&cfg.Rules, input("", map[string]string{":path": "/headers"}), quiet)
	if qbuf.Len() != 0 {
		t.Errorf("rbac at info logged:\n%s", qbuf.String())
	}
}

// With enforced rules beside the shadow rules the enforced ones decide, and both results
// are in the metadata under their own prefixes; the enforced decision is logged.
func TestShadowAndEnforcedRules(t *testing.T) {
	allowIP := &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
		"ns[foo]-policy[allow-ip]-rule[0]": {Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
			Rule: &matcherv3.PathMatcher_Path{Path: exact("/ip")}}}}}, Principals: []*rbacv3.Principal{anyID}},
	}}
	shadow := denyHeaders()
	shadow.Action = rbacv3.RBAC_ALLOW // a dry-run ALLOW policy allowing /headers only
	cfg, err := CompileHTTP(mustAny(t, &httprbacv3.RBAC{Rules: allowIP, ShadowRules: shadow, ShadowRulesStatPrefix: "istio_dry_run_allow_"}))
	if err != nil {
		t.Fatal(err)
	}
	st := stats.NewStore()
	log, buf := rbacLogger(slog.LevelDebug)
	hs := cfg.HTTPStats(st.HTTP("in"))
	res := hs.Check(&cfg.Rules, input("", map[string]string{":path": "/headers"}), log)
	if res.Allowed || res.Policy != "" {
		t.Fatalf("/headers: %+v, want denied by the enforced ALLOW rules (no policy)", res)
	}
	for k, want := range map[string]string{
		"istio_dry_run_allow_shadow_engine_result":       "allowed",
		"istio_dry_run_allow_shadow_effective_policy_id": dryRunPolicy,
		"enforced_engine_result":                         "denied",
	} {
		if got := str(res.Metadata, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	res = hs.Check(&cfg.Rules, input("", map[string]string{":path": "/ip"}), log)
	if !res.Allowed || res.Policy != "ns[foo]-policy[allow-ip]-rule[0]" || str(res.Metadata, "enforced_effective_policy_id") != res.Policy {
		t.Fatalf("/ip: %+v", res)
	}
	if str(res.Metadata, "istio_dry_run_allow_shadow_engine_result") != "denied" {
		t.Errorf("/ip shadow: %v", res.Metadata)
	}
	for _, want := range []string{"enforced denied, matched policy none\n", "enforced allowed, matched policy ns[foo]-policy[allow-ip]-rule[0]\n", "shadow denied, matched policy none\n"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("rbac log lacks %q:\n%s", want, buf.String())
		}
	}
	for name, want := range map[string]int64{"http.in.rbac.allowed": 1, "http.in.rbac.denied": 1, "http.in.rbac.istio_dry_run_allow_.shadow_allowed": 1, "http.in.rbac.istio_dry_run_allow_.shadow_denied": 1} {
		if got := st.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	// Two filters (DENY, then ALLOW) share envoy.filters.http.rbac's metadata.
	md := map[string]*structpb.Struct{}
	res.MergeInto(md, HTTPFilterName)
	Result{Metadata: map[string]*structpb.Value{"istio_dry_run_deny_shadow_engine_result": structpb.NewStringValue("allowed")}}.MergeInto(md, HTTPFilterName)
	if f := md[HTTPFilterName].GetFields(); len(f) != 4 || f["istio_dry_run_deny_shadow_engine_result"].GetStringValue() != "allowed" {
		t.Errorf("merged metadata: %v", md)
	}
}

// The network filter's shadow rules: a connection is checked, counted under
// <stat_prefix>rbac.<shadow prefix>.shadow_*, and only the shadow result is reported.
func TestNetworkShadowRules(t *testing.T) {
	shadow := &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{
		"ns[foo]-policy[deny-tcp]-rule[0]": {Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8080}}}, Principals: []*rbacv3.Principal{anyID}},
	}}
	cfg, err := CompileNetwork(mustAny(t, &netrbacv3.RBAC{StatPrefix: "tcp.", ShadowRules: shadow, ShadowRulesStatPrefix: "istio_dry_run_deny_"}))
	if err != nil {
		t.Fatal(err)
	}
	st := stats.NewStore()
	log, buf := rbacLogger(slog.LevelDebug)
	res := cfg.NetworkStats(st).CheckConnection(&cfg.Rules, input("spiffe://cluster.local/ns/foo/sa/sleep", nil), log)
	if !res.Allowed {
		t.Fatal("a dry-run policy closed the connection")
	}
	if got := st.Value("tcp.rbac.istio_dry_run_deny_.shadow_denied"); got != 1 {
		t.Errorf("tcp.rbac.istio_dry_run_deny_.shadow_denied = %d", got)
	}
	if len(res.Metadata) != 2 || str(res.Metadata, "istio_dry_run_deny_shadow_engine_result") != "denied" {
		t.Errorf("metadata %v", res.Metadata)
	}
	for _, want := range []string{
		"checking connection: requestedServerName: , sourceIP: 10.0.0.1:40000, directRemoteIP: 10.0.0.1:40000,remoteIP: 10.0.0.1:40000, localAddress: 10.0.0.2:8080, ssl: uriSanPeerCertificate: spiffe://cluster.local/ns/foo/sa/sleep, dnsSanPeerCertificate: backend.local, subjectPeerCertificate: CN=cn-x, dynamicMetadata: ",
		"shadow denied, matched policy ns[foo]-policy[deny-tcp]-rule[0]\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("rbac log lacks %q:\n%s", want, buf.String())
		}
	}
}
