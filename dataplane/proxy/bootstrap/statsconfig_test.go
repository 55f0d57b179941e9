package bootstrap

import (
	"bytes"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Istio's stats_config (the sidecar bootstrap's stats_tags, use_all_default_tags false
// and its inclusion list) gives Envoy's stats Istio's tag names: cluster_name from the
// ';'-terminated alt_stat_name, response_code, http_conn_manager_prefix, listener tags
// (through the rewritten lookahead); stats outside the inclusion list do not exist, and
// istio.stats' metrics keep their own labels.
func TestIstioStatsConfigApplies(t *testing.T) {
	t.Parallel()
	b, err := Load(Source{Path: istioSidecar})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := StatsConfig(b)
	if err != nil {
		t.Fatalf("Istio's stats_config: %v", err)
	}
	st := stats.NewStore()
	st.SetConfig(sc)
	cl := st.Cluster("xds-grpc;")
	cl.Counter("upstream_rq_200").Add(3)
	cl.Counter("upstream_rq_2xx").Add(3)
	cl.Counter("upstream_cx_total").Inc()
	// Istio's inclusion list leaves service clusters out (istio_* carries their traffic).
	st.Cluster("outbound|9080||reviews.default.svc.cluster.local;").Counter("upstream_rq_200").Inc()
	st.Named("cluster_manager.cds").Counter("update_success").Inc()
	st.HTTP("inbound_0.0.0.0_9080;").Counter("rbac.allowed").Inc()
	// A dry-run DENY policy's shadow stat, as the RBAC filter names it.
	st.HTTP("inbound_0.0.0.0_9080;").Counter("rbac.istio_dry_run_deny_.shadow_denied").Add(20)
	st.Listener("0.0.0.0:15006").Scope("http", "").Scope("inbound_0.0.0.0_9080", "").Counter("downstream_rq_completed").Inc()
	st.HTTP("outbound_0.0.0.0_9080").Counter("downstream_rq_total").Inc() // not included
	st.TaggedCounter(stats.CustomNamespace+".istio_requests_total", []stats.Tag{{Name: "reporter", Value: "source"}, {Name: "response_code", Value: "200"}}).Inc()
	var out bytes.Buffer
	if err := st.WritePrometheus(&out, stats.Filter{}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`envoy_cluster_upstream_rq{cluster_name="xds-grpc",response_code="200"} 3`,
		`envoy_cluster_upstream_rq{cluster_name="xds-grpc",response_code_class="2xx"} 3`,
		`envoy_cluster_upstream_cx_total{cluster_name="xds-grpc"} 1`,
		`envoy_cluster_manager_cds_update_success 1`,
		`envoy_http_rbac{http_conn_manager_prefix="inbound_0.0.0.0_9080",authz_enforce_result="allowed"} 1`,
		`envoy_http_rbac{http_conn_manager_prefix="inbound_0.0.0.0_9080",authz_dry_run_action="deny",authz_dry_run_result="denied"} 20`,
		`istio_requests_total{reporter="source",response_code="200"} 1`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(got, "outbound_0.0.0.0_9080") || strings.Contains(got, "reviews") || strings.Contains(got, "envoy_cluster_name") || strings.Contains(got, "listener_downstream_rq_completed") {
		t.Errorf("a stat outside the inclusion list, or an Envoy default tag, was rendered:\n%s", got)
	}
	var text bytes.Buffer
	_ = st.WriteText(&text, stats.Filter{})
	if strings.Contains(text.String(), "http.outbound_0.0.0.0_9080.") {
		t.Error("/stats shows an excluded stat")
	}
}

// Istio's listener prefix regex uses an ECMAScript lookahead; its RE2 rewrite matches
// the same names.
func TestTagRegexLookaheadRewrite(t *testing.T) {
	t.Parallel()
	re, err := compileTagRegex(`^listener(?=\.).*?\.http\.(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)`)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"listener.0.0.0.0_15006.http.10.0.0.1_8080.downstream_rq_2xx": "10.0.0.1_8080",
		"listener.http.10.0.0.1_8080.x":                               "10.0.0.1_8080",
		"listenerX.http.10.0.0.1_8080.x":                              "",
	} {
		m := re.FindStringSubmatch(name)
		got := ""
		if m != nil {
			got = m[2]
		}
		if got != want {
			t.Errorf("%s: tag %q, want %q", name, got, want)
		}
	}
}
