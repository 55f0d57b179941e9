package listener

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

// TestNetworkRBACDenialIsAccessLogged pins what an Istio sidecar logs for a TCP connection
// its network RBAC filter closes: tcp_proxy's access log entry (Istio puts access_log on
// tcp_proxy), with the denying policy in %CONNECTION_TERMINATION_DETAILS%, the cluster
// and the upstream host tcp_proxy connected to before RBAC decided (Envoy's tcp_proxy
// connects at once and holds downstream reads until connected; RBAC decides on the first
// read) and no bytes; an allowed connection's entry has no termination details.
func TestNetworkRBACDenialIsAccessLogged(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	p := newProxyUnderTest(t, tlstest.NewCA(t), backendID)
	p.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|9000||", tagServer(t, "served"), nil)})
	tcp := &tcpv3.TcpProxy{StatPrefix: "inbound|9000||", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "inbound|9000||"},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{
			Path: logPath,
			AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
					InlineString: "%CONNECTION_TERMINATION_DETAILS% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %BYTES_RECEIVED% %FILTER_CHAIN_NAME%\n"}},
			}}},
		})}}}}
	policy := func(action rbacv3.RBAC_Action) *listenerv3.Filter {
		return &listenerv3.Filter{Name: "envoy.filters.network.rbac", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &netrbacv3.RBAC{
			StatPrefix: "tcp.",
			Rules: &rbacv3.RBAC{Action: action, Policies: map[string]*rbacv3.Policy{
				"ns[default]-policy[deny-local]-rule[0]": {Permissions: []*rbacv3.Permission{anyPermission},
					Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr("127.0.0.1", 32)}}}},
			}},
		})}}
	}
	chain := func(name string, action rbacv3.RBAC_Action) *listenerv3.Listener {
		return &listenerv3.Listener{Name: name, Address: addr("127.0.0.1", 0), FilterChains: []*listenerv3.FilterChain{{
			Name: name, Filters: []*listenerv3.Filter{policy(action), {Name: "envoy.filters.network.tcp_proxy",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, tcp)}}},
		}}}
	}
	denied, _ := p.listen(t, chain("denying", rbacv3.RBAC_DENY))
	allowed, _ := p.listen(t, chain("allowing", rbacv3.RBAC_ALLOW))

	if got := readAll(t, denied); got != "" {
		t.Fatalf("denied connection got %q, want it closed", got)
	}
	if got := readAll(t, allowed); got != "served" {
		t.Fatalf("allowed connection got %q, want served", got)
	}
	var lines []string
	deadline := time.Now().Add(5 * time.Second)
	for len(lines) < 2 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) < 2 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var sawDenied, sawAllowed bool
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "rbac_access_denied_matched_policy[ns[default]-policy[deny-local]-rule[0]] inbound|9000|| 127.0.0.1:") &&
			strings.HasSuffix(l, " 0 denying"):
			sawDenied = true
		case strings.HasPrefix(l, "- inbound|9000|| 127.0.0.1:") && strings.HasSuffix(l, " 4 allowing"):
			sawAllowed = true
		}
	}
	if !sawDenied || !sawAllowed {
		t.Errorf("access log:\n%s\nwant the denial with its policy and the allowed connection without details", strings.Join(lines, "\n"))
	}
}

// TestNetworkShadowRulesOnlyReport: a connection the network RBAC filter's shadow rules
// deny (a dry-run DENY policy) is still served, counted as shadow denied, and its shadow
// result is in the connection's dynamic metadata under envoy.filters.network.rbac, where
// tcp_proxy's access log reads it.
func TestNetworkShadowRulesOnlyReport(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	p := newProxyUnderTest(t, tlstest.NewCA(t), backendID)
	p.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|9000||", tagServer(t, "served"), nil)})
	tcp := &tcpv3.TcpProxy{StatPrefix: "inbound|9000||", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "inbound|9000||"},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{
			Path: logPath,
			AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
					InlineString: "%DYNAMIC_METADATA(envoy.filters.network.rbac:istio_dry_run_deny_shadow_engine_result)% %DYNAMIC_METADATA(envoy.filters.network.rbac:istio_dry_run_deny_shadow_effective_policy_id)% %CONNECTION_TERMINATION_DETAILS%\n"}},
			}}},
		})}}}}
	shadow := &listenerv3.Filter{Name: "envoy.filters.network.rbac", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &netrbacv3.RBAC{
		StatPrefix: "tcp.", ShadowRulesStatPrefix: "istio_dry_run_deny_",
		ShadowRules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{
			"ns[default]-policy[deny-local]-rule[0]": {Permissions: []*rbacv3.Permission{anyPermission},
				Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidr("127.0.0.1", 32)}}}},
		}},
	})}}
	a, _ := p.listen(t, &listenerv3.Listener{Name: "dry-run", Address: addr("127.0.0.1", 0), FilterChains: []*listenerv3.FilterChain{{
		Name: "dry-run", Filters: []*listenerv3.Filter{shadow, {Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, tcp)}}},
	}}})
	if got := readAll(t, a); got != "served" {
		t.Fatalf("connection under a dry-run DENY got %q, want served", got)
	}
	var line string
	for deadline := time.Now().Add(5 * time.Second); line == "" && time.Now().Before(deadline); {
		b, _ := os.ReadFile(logPath)
		if line = strings.TrimSpace(string(b)); line == "" {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if want := "denied ns[default]-policy[deny-local]-rule[0] -"; line != want {
		t.Errorf("access log %q, want %q", line, want)
	}
	if got := p.stats.Value("tcp.rbac.istio_dry_run_deny_.shadow_denied"); got != 1 {
		t.Errorf("tcp.rbac.istio_dry_run_deny_.shadow_denied = %d", got)
	}
	if got := p.stats.Value("tcp.rbac.denied"); got != 0 {
		t.Errorf("tcp.rbac.denied = %d, want 0 (no enforced rules)", got)
	}
}

// TestHTTPShadowRulesInAccessLog: a request an HTTP RBAC filter's shadow rules deny (the
// authz-dry-run page's deny-path-headers) is served, and the filter's results are in the
// request's dynamic metadata under envoy.filters.http.rbac for the access log, the shadow
// keys under their prefix beside the enforced ALLOW filter's.
func TestHTTPShadowRulesInAccessLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "in.log")
	p := newProxyUnderTest(t, tlstest.NewCA(t), backendID)
	p.clusters.AddStatic([]*cluster.Config{staticCluster(t, "inbound|8080||", headerEcho(t), nil)})
	shadow := &hcmv3.HttpFilter{Name: "envoy.filters.http.rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &httprbacv3.RBAC{
		ShadowRulesStatPrefix: "istio_dry_run_deny_",
		ShadowRules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY, Policies: map[string]*rbacv3.Policy{"ns[foo]-policy[deny-path-headers]-rule[0]": {
			Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: tlstest.Exact("/headers")}}}}},
			Principals:  []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
		}}},
	})}}
	allow := httpRBAC(t, rbacv3.RBAC_ALLOW, map[string]*rbacv3.Policy{"ns[foo]-policy[all]-rule[0]": {
		Permissions: []*rbacv3.Permission{anyPermission}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}},
	}})
	const format = "%RESPONSE_CODE% %DYNAMIC_METADATA(envoy.filters.http.rbac:istio_dry_run_deny_shadow_engine_result)% " +
		"%DYNAMIC_METADATA(envoy.filters.http.rbac:istio_dry_run_deny_shadow_effective_policy_id)% " +
		"%DYNAMIC_METADATA(envoy.filters.http.rbac:enforced_engine_result)% %DYNAMIC_METADATA(envoy.filters.http.rbac:enforced_effective_policy_id)%\n"
	in, _ := p.listen(t, &listenerv3.Listener{Name: "inbound", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: routeHCM(t, "inbound|8080||", logPath, func(h *hcmv3.HttpConnectionManager) {
			h.StatPrefix = "inbound_0.0.0.0_8080"
			h.HttpFilters = append([]*hcmv3.HttpFilter{shadow, allow}, h.HttpFilters...)
			h.AccessLog[0].GetTypedConfig().Value = mustAny(t, &filev3.FileAccessLog{Path: logPath,
				AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
					TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: format}}}}}}).Value
		})}}})
	for _, path := range []string{"/headers", "/ip"} {
		if code, _ := do(t, "GET", "http://"+in.String()+path); code != 200 {
			t.Fatalf("GET %s: %d, want 200 (the DENY is a dry run)", path, code)
		}
	}
	want := "200 denied ns[foo]-policy[deny-path-headers]-rule[0] allowed ns[foo]-policy[all]-rule[0]\n" +
		"200 allowed - allowed ns[foo]-policy[all]-rule[0]\n"
	deadline := time.Now().Add(5 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		if string(log) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log:\n%s\nwant:\n%s", log, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitStat(t, p.stats, "http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_.shadow_denied", 1)
	waitStat(t, p.stats, "http.inbound_0.0.0.0_8080.rbac.istio_dry_run_deny_.shadow_allowed", 1)
}
