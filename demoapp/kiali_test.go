package demoapp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// bookinfoSeries is what the lab's Prometheus answers for Bookinfo's traffic through the
// ingress gateway: one series per reporter-side query, by Kiali's labels.
func bookinfoSeries(query string) []map[string]string {
	wl := func(prefix, ns, workload, app, version string) map[string]string {
		return map[string]string{prefix + "_workload_namespace": ns, prefix + "_workload": workload,
			prefix + "_canonical_service": app, prefix + "_canonical_revision": version, prefix + "_cluster": "Kubernetes"}
	}
	series := func(src, dst map[string]string, svc, code string) map[string]string {
		m := map[string]string{"destination_service_namespace": "default", "destination_service_name": svc,
			"destination_service": svc + ".default.svc.cluster.local", "request_protocol": "http", "response_code": code, "response_flags": "-"}
		for k, v := range src {
			m[k] = v
		}
		for k, v := range dst {
			m[k] = v
		}
		return m
	}
	gw := wl("source", "istio-system", "istio-ingressgateway", "istio-ingressgateway", "latest")
	pp := wl("destination", "default", "productpage-v1", "productpage", "v1")
	ppSrc := wl("source", "default", "productpage-v1", "productpage", "v1")
	secured := func(m map[string]string, policy string) map[string]string {
		m["connection_security_policy"] = policy
		return m
	}
	switch {
	case strings.Contains(query, "connection_security_policy") && strings.Contains(query, "istio_requests_total") && strings.Contains(query, `destination_service_namespace="default"`):
		return []map[string]string{
			secured(series(gw, pp, "productpage", "200"), "mutual_tls"),
			secured(series(ppSrc, wl("destination", "default", "reviews-v2", "reviews", "v2"), "reviews", "200"), "mutual_tls"),
			secured(series(ppSrc, wl("destination", "default", "reviews-v1", "reviews", "v1"), "reviews", "503"), "none"),
			// traffic the graph has not drawn: no node or edge of its own
			secured(series(ppSrc, wl("destination", "default", "nowhere-v1", "nowhere", "v1"), "nowhere", "200"), "mutual_tls"),
		}
	case strings.Contains(query, "connection_security_policy"):
		return nil
	case strings.Contains(query, "istio_tcp_sent_bytes_total") && strings.Contains(query, `reporter="source"`):
		m := series(wl("source", "default", "ratings-v2", "ratings", "v2"), wl("destination", "default", "mongodb-v1", "mongodb", "v1"), "mongodb", "")
		delete(m, "response_code")
		delete(m, "request_protocol")
		return []map[string]string{m}
	case strings.Contains(query, "istio_tcp_"):
		return nil
	case strings.Contains(query, `reporter="destination"`):
		return []map[string]string{series(gw, pp, "productpage", "200")}
	case strings.Contains(query, `reporter="source"`):
		return []map[string]string{
			series(ppSrc, wl("destination", "default", "details-v1", "details", "v1"), "details", "200"),
			series(ppSrc, wl("destination", "default", "reviews-v2", "reviews", "v2"), "reviews", "200"),
			series(ppSrc, wl("destination", "default", "reviews-v1", "reviews", "v1"), "reviews", "503"),
			series(wl("source", "default", "reviews-v2", "reviews", "v2"), wl("destination", "default", "ratings-v1", "ratings", "v1"), "ratings", "200"),
		}
	}
	return nil
}

func kialiTestServer(tb testing.TB) (srv *httptest.Server, queries *[]string, volumeRoot string) {
	tb.Helper()
	queries = new([]string)
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		*queries = append(*queries, q)
		var res []map[string]any
		for _, m := range bookinfoSeries(q) {
			res = append(res, map[string]any{"metric": m, "value": []any{1, "0.5"}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	tb.Cleanup(prom.Close)
	root := tb.TempDir()
	f := filepath.Join(root, kialiConfigFile)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := "external_services:\n  prometheus:\n    enabled: true\n    url: " + prom.URL + "\nserver:\n  port: 20001\n  web_root: /kiali\nchat_ai: {enabled: false}\n"
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	c, err := readKialiConfig(root)
	if err != nil {
		tb.Fatal(err)
	}
	k := &kiali{cfg: c, volumeRoot: root, client: prom.Client(), now: func() time.Time { return time.Unix(1700000000, 0) }}
	srv = httptest.NewServer(k.handler())
	tb.Cleanup(srv.Close)
	return srv, queries, root
}

// graphEdges names a graph's edges "source -> target" by the nodes' app (and version)
// or service, and gives each edge's traffic.
func graphEdges(t *testing.T, g kialiGraphConfig) map[string]kialiTraffic {
	t.Helper()
	name := map[string]string{}
	for _, n := range g.Elements.Nodes {
		d := n.Data
		switch d.NodeType {
		case "service":
			name[d.ID] = "svc:" + d.Service
		case "workload":
			name[d.ID] = "wl:" + d.Workload
		default:
			name[d.ID] = strings.TrimSuffix(d.App+" "+d.Version, " ")
		}
	}
	out := map[string]kialiTraffic{}
	for _, e := range g.Elements.Edges {
		s, ok1 := name[e.Data.Source]
		d, ok2 := name[e.Data.Target]
		if !ok1 || !ok2 {
			t.Fatalf("edge %+v names a node the graph does not have", e.Data)
		}
		out[s+" -> "+d] = e.Data.Traff
	}
	return out
}

// graphEdgeName names an edge as graphEdges does.
func graphEdgeName(g kialiGraphConfig, e *kialiEdgeData) string {
	name := func(id string) string {
		for _, n := range g.Elements.Nodes {
			if d := n.Data; d.ID == id {
				if d.NodeType == "service" {
					return "svc:" + d.Service
				}
				return strings.TrimSuffix(d.App+" "+d.Version, " ")
			}
		}
		return "?"
	}
	return name(e.Source) + " -> " + name(e.Target)
}

// TestKialiGraph: the graph API asks Prometheus as Kiali does (requests into the
// namespace as the destination reports them, from it as the source does) and draws
// Bookinfo's versioned-app graph with service nodes, and its workload graph, with
// Kiali's rates, percentages and response codes.
func TestKialiGraph(t *testing.T) {
	srv, queries, _ := kialiTestServer(t)
	get := func(q string) (int, kialiGraphConfig, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/kiali/api/namespaces/graph?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		var g kialiGraphConfig
		_ = json.Unmarshal(raw, &g)
		return resp.StatusCode, g, string(raw)
	}
	code, g, raw := get("namespaces=default&graphType=versionedApp&duration=60s&injectServiceNodes=true")
	if code != http.StatusOK {
		t.Fatalf("graph: %d %s", code, raw)
	}
	if g.GraphType != "versionedApp" || g.Duration != 60 || g.Timestamp != 1700000000 {
		t.Errorf("graph header: %s %d %d", g.GraphType, g.Duration, g.Timestamp)
	}
	want := []string{`sum(rate(istio_requests_total{reporter="destination",source_workload_namespace!="default",destination_service_namespace="default"}[60s])) by (` + kialiGroupBy + `) > 0`,
		`sum(rate(istio_tcp_sent_bytes_total{reporter="destination",source_workload_namespace!="default",destination_service_namespace="default"}[60s])) by (` + kialiTCPGroupBy + `) > 0`,
		`sum(rate(istio_requests_total{reporter="source",source_workload_namespace="default"}[60s])) by (` + kialiGroupBy + `) > 0`,
		`sum(rate(istio_tcp_sent_bytes_total{reporter="source",source_workload_namespace="default"}[60s])) by (` + kialiTCPGroupBy + `) > 0`}
	if len(*queries) != 8 || !slices.Equal((*queries)[:4], want) || !strings.Contains((*queries)[4], ",connection_security_policy) > 0") {
		t.Errorf("queries:\n%q\nwant\n%q", *queries, want)
	}
	edges := graphEdges(t, g)
	var names []string
	for e := range edges {
		names = append(names, e)
	}
	slices.Sort(names)
	wantEdges := []string{
		"istio-ingressgateway latest -> svc:productpage",
		"productpage v1 -> svc:details", "productpage v1 -> svc:reviews",
		"ratings v2 -> svc:mongodb", "reviews v2 -> svc:ratings",
		"svc:details -> details v1", "svc:mongodb -> mongodb v1", "svc:productpage -> productpage v1",
		"svc:ratings -> ratings v1", "svc:reviews -> reviews v1", "svc:reviews -> reviews v2",
	}
	if !slices.Equal(names, wantEdges) {
		t.Fatalf("edges:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(wantEdges, "\n"))
	}
	rv := edges["productpage v1 -> svc:reviews"]
	if rv.Protocol != "http" || rv.Rates["http"] != "1.00" || rv.Rates["http5xx"] != "0.50" || rv.Rates["httpPercentErr"] != "50.0" ||
		rv.Rates["httpPercentReq"] != "66.7" || rv.Responses["503"].Flags["-"] != "50.0" || rv.Responses["200"].Hosts["reviews.default.svc.cluster.local"] != "50.0" {
		t.Errorf("productpage -> reviews traffic: %+v %+v %+v", rv.Rates, rv.Responses["200"], rv.Responses["503"])
	}
	for e, want := range map[string]string{"istio-ingressgateway latest -> svc:productpage": "100", "svc:productpage -> productpage v1": "100",
		"productpage v1 -> svc:reviews": "50", "svc:reviews -> reviews v2": "100", "svc:reviews -> reviews v1": "", "productpage v1 -> svc:details": ""} {
		for _, ew := range g.Elements.Edges {
			if graphEdgeName(g, ew.Data) == e && ew.Data.IsMTLS != want {
				t.Errorf("%s: isMTLS %q, want %q", e, ew.Data.IsMTLS, want)
			}
		}
	}
	if db := edges["ratings v2 -> svc:mongodb"]; db.Protocol != "tcp" || len(db.Rates) != 1 || db.Rates["tcp"] != "0.50" || db.Responses["-"].Flags["-"] != "100.0" {
		t.Errorf("ratings -> mongodb traffic: %+v %+v", db.Rates, db.Responses["-"])
	}
	for _, n := range g.Elements.Nodes {
		d := n.Data
		switch d.App {
		case "istio-ingressgateway":
			if !d.IsRoot || !d.IsOutside || d.Namespace != "istio-system" || len(d.Traffic) != 1 || d.Traffic[0].Rates["httpOut"] != "0.50" {
				t.Errorf("gateway node: %+v", d)
			}
		case "productpage":
			if d.IsRoot || d.IsOutside || d.Workload != "productpage-v1" || d.Version != "v1" || len(d.Traffic) != 1 ||
				d.Traffic[0].Rates["httpIn"] != "0.50" || d.Traffic[0].Rates["httpOut"] != "1.50" {
				t.Errorf("productpage node: %+v", d)
			}
		}
		if len(d.ID) != 32 {
			t.Errorf("node id %q: Kiali's are md5 hashes", d.ID)
		}
	}

	*queries = nil
	_, g, _ = get("namespaces=default&graphType=workload&appenders=deadNode,istio")
	if len(*queries) != 4 {
		t.Errorf("without the securityPolicy appender: %d queries, want the traffic's 4", len(*queries))
	}
	names = names[:0]
	for e := range graphEdges(t, g) {
		names = append(names, e)
	}
	slices.Sort(names)
	wantEdges = []string{"wl:istio-ingressgateway -> wl:productpage-v1", "wl:productpage-v1 -> wl:details-v1",
		"wl:productpage-v1 -> wl:reviews-v1", "wl:productpage-v1 -> wl:reviews-v2", "wl:ratings-v2 -> wl:mongodb-v1", "wl:reviews-v2 -> wl:ratings-v1"}
	if !slices.Equal(names, wantEdges) {
		t.Errorf("workload graph edges:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(wantEdges, "\n"))
	}
	_, g, _ = get("namespaces=default&graphType=app&rateTcp=none")
	if _, ok := graphEdges(t, g)["productpage -> reviews"]; !ok || len(g.Elements.Nodes) != 5 {
		t.Errorf("app graph: %d nodes, edges %v", len(g.Elements.Nodes), graphEdges(t, g))
	}

	for q, want := range map[string]string{
		"graphType=app":                         "at least one namespace must be specified via the namespaces query parameter",
		"namespaces=default&graphType=box":      `graphType "box": must be one of app, service, versionedApp, workload`,
		"namespaces=default&duration=soon":      `duration "soon": a duration of at least 1s, as 60s or 10m`,
		`namespaces=a"b`:                        `namespaces: "a\"b" is not a namespace name`,
		"namespaces=default&queryTime=-1":       `queryTime "-1": Unix seconds`,
		"namespaces=x&injectServiceNodes=maybe": `injectServiceNodes "maybe": true or false`,
		"namespaces=x&rateGrpc=sent":            `rateGrpc "sent": meshlab's Kiali counts gRPC requests only (istio_request_messages_total is not drawn): use rateGrpc=requests`,
		"namespaces=x&rateTcp=bytes":            `rateTcp "bytes": must be one of none, received, sent, total`,
		"namespaces=x&rateHttp=all":             `rateHttp "all": must be one of none, requests`,
	} {
		code, _, raw := get(q)
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(raw), &e)
		if code != http.StatusBadRequest || e.Error != want {
			t.Errorf("%s: %d %s; want 400 %q", q, code, raw, want)
		}
	}
	for p, want := range map[string]int{"/kiali/healthz": 200, "/kiali/api": 200, "/kiali/console": 404, "/api/namespaces/graph": 404, "/kiali": 200, "/kiali/": 200} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", p, resp.StatusCode, want)
		}
	}
}

// TestKialiConfig: Kiali's defaults fill what config.yaml leaves out; a config the
// persona cannot act on is refused by field.
func TestKialiConfig(t *testing.T) {
	for cfg, want := range map[string]string{
		"{}": "port 20001 root / prometheus http://prometheus.istio-system:9090",
		"deployment: {namespace: obs}\nserver: {web_root: /kiali/}": "port 20001 root /kiali prometheus http://prometheus.obs:9090",
		"server: {port: 70000}":                             kialiConfigFile + ": server.port 70000 is not a port",
		"external_services: {prometheus: {enabled: false}}": kialiConfigFile + ": external_services.prometheus.enabled is false: meshlab's Kiali builds its graph from Prometheus only",
		"external_services: {prometheus: {url: 'nohost'}}":  kialiConfigFile + `: external_services.prometheus.url "nohost" is not a URL`,
	} {
		root := t.TempDir()
		f := filepath.Join(root, kialiConfigFile)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := readKialiConfig(root)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = fmt.Sprintf("port %d root %s prometheus %s", c.Server.Port, c.Server.WebRoot, c.ExternalServices.Prometheus.URL)
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", cfg, got, want)
		}
	}
}

// FuzzKialiGraphQuery: any query string parses to a valid query or an error, and a
// valid one names namespaces a PromQL selector can quote.
func FuzzKialiGraphQuery(f *testing.F) {
	f.Add("namespaces=default&graphType=versionedApp&duration=60s&injectServiceNodes=true")
	f.Add("namespaces=a,b,a&graphType=service&queryTime=1700000000")
	f.Add(`namespaces=x"}&duration=0s`)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseKialiGraphQuery(v, time.Unix(1, 0))
		if err != nil {
			return
		}
		if len(q.Namespaces) == 0 || q.Duration < time.Second {
			t.Fatalf("%q: %+v", raw, q)
		}
		for _, ns := range q.Namespaces {
			if strings.ContainsAny(ns, `"\`) {
				t.Fatalf("%q: namespace %q breaks the selector", raw, ns)
			}
		}
	})
}

// TestKialiValidations: a Service whose pods have a sidecar and whose port is named foo
// gets Kiali's KIA0601 warning on spec/ports[0], in its details (validate=true) and the
// namespace's summary; named http, or without a sidecar, or with an appProtocol, it is
// valid. Without the lab's Services file the answer says so.
func TestKialiValidations(t *testing.T) {
	srv, _, root := kialiTestServer(t)
	get := func(p string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := get("/kiali/api/namespaces/bookinfo/services/details?validate=true"); code != http.StatusServiceUnavailable || !strings.Contains(body, "the lab's Services") {
		t.Errorf("without the Services file: %d %s", code, body)
	}
	write := func(svcs []KialiService) {
		t.Helper()
		raw, _ := json.Marshal(svcs)
		f := filepath.Join(root, KialiServicesFile)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	svcs := []KialiService{
		{Namespace: "bookinfo", Name: "details", Ports: []KialiServicePort{{Name: "foo", Port: 9080}}, Sidecar: true},
		{Namespace: "bookinfo", Name: "reviews", Ports: []KialiServicePort{{Name: "http", Port: 9080}}, Sidecar: true},
		{Namespace: "bookinfo", Name: "ratings", Ports: []KialiServicePort{{Name: "web", Port: 9080, AppProtocol: "http"}}, Sidecar: true},
		{Namespace: "bookinfo", Name: "plain", Ports: []KialiServicePort{{Name: "foo", Port: 80}}},
		{Namespace: "other", Name: "details", Ports: []KialiServicePort{{Name: "bar", Port: 80}}, Sidecar: true},
	}
	write(svcs)
	var details struct {
		Service struct {
			Name  string
			Ports []struct{ Name string }
		}
		Validations map[string]map[string]kialiValidation
	}
	code, body := get("/kiali/api/namespaces/bookinfo/services/details?validate=true")
	if err := json.Unmarshal([]byte(body), &details); code != http.StatusOK || err != nil {
		t.Fatalf("details: %d %s", code, body)
	}
	v := details.Validations["service"]["details"]
	want := []kialiCheck{{Code: "KIA0601", Message: "Port name must follow <protocol>[-suffix] form", Severity: "warning", Path: "spec/ports[0]"}}
	if v.Valid || !slices.Equal(v.Checks, want) || v.Namespace != "bookinfo" || v.ObjectGVK["Kind"] != "Service" {
		t.Errorf("details' validation: %+v", v)
	}
	for _, name := range []string{"reviews", "ratings", "plain"} {
		_, body := get("/kiali/api/namespaces/bookinfo/services/" + name + "?validate=true")
		if !strings.Contains(body, `"valid":true,"checks":[]`) {
			t.Errorf("%s: %s, want no checks", name, body)
		}
	}
	if _, body := get("/kiali/api/namespaces/bookinfo/services/details"); !strings.Contains(body, `"validations":{}`) {
		t.Errorf("details without validate: %s", body)
	}
	if code, body := get("/kiali/api/namespaces/bookinfo/services/nope"); code != http.StatusNotFound {
		t.Errorf("an unknown service: %d %s", code, body)
	}
	if _, body := get("/kiali/api/istio/validations?namespaces=bookinfo,empty"); body != `{"Kubernetes":{"bookinfo":{"errors":0,"objectCount":4,"warnings":1},"empty":{"errors":0,"objectCount":0,"warnings":0}}}`+"\n" {
		t.Errorf("summary: %s", body)
	}
	svcs[0].Ports[0].Name = "http"
	write(svcs)
	if _, body := get("/kiali/api/istio/validations?namespaces=bookinfo"); body != `{"Kubernetes":{"bookinfo":{"errors":0,"objectCount":4,"warnings":0}}}`+"\n" {
		t.Errorf("summary after the port is renamed http: %s", body)
	}
}

// BenchmarkKialiGraph: one versioned-app graph request with service nodes and the
// security appender over Bookinfo's series, answered by a local fake Prometheus (its
// JSON decode included): what a graph refresh of the page costs the persona.
func BenchmarkKialiGraph(b *testing.B) {
	srv, _, _ := kialiTestServer(b)
	url := srv.URL + "/kiali/api/namespaces/graph?namespaces=default&graphType=versionedApp&duration=60s&injectServiceNodes=true"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
}

// FuzzKialiConfig: any config.yaml reads to a config the persona can serve (a port, a
// web root, a Prometheus URL with a host) or an error.
func FuzzKialiConfig(f *testing.F) {
	f.Add("server: {port: 20001, web_root: /kiali}\nexternal_services: {prometheus: {enabled: true}}\n")
	f.Add("deployment: {namespace: obs}\nexternal_services: {prometheus: {url: 'http://p:9090/x'}}\n")
	f.Add("server: {port: -1}")
	root := f.TempDir()
	file := filepath.Join(root, kialiConfigFile)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cfg string) {
		if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := readKialiConfig(root)
		if err != nil {
			return
		}
		u, uerr := url.Parse(c.ExternalServices.Prometheus.URL)
		if c.Server.Port < 1 || c.Server.Port > 65535 || !strings.HasPrefix(c.Server.WebRoot, "/") || uerr != nil || u.Host == "" {
			t.Fatalf("%q: %+v", cfg, c)
		}
		_ = (&kiali{cfg: c}).handler() // its routes are valid patterns
	})
}
