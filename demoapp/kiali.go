package demoapp

import (
	"cmp"
	"context"
	"crypto/md5" //nolint:gosec // Kiali's node ids are md5 hashes of its node keys: names, not secrets
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The kiali persona stands in for the quay.io/kiali/kiali image of Istio's
// samples/addons/kiali.yaml, as far as a learner of the Kiali page touches it without a
// browser: Kiali's graph API, built as Kiali builds it from the lab's real Prometheus'
// istio_requests_total. It reads the sample's config (/kiali-configuration/config.yaml,
// the kiali ConfigMap) below VolumeRoot for server.port, server.web_root and
// external_services.prometheus.url, and serves under web_root: /healthz (the probes'),
// /api (Kiali's status) and /api/namespaces/graph (the cytoscape JSON of the graph page:
// nodes per app, versioned app, workload or service, edges with request rates and
// response codes), /api/namespaces/<ns>/services/<name> and /api/istio/validations
// (KIA0601 on a Service's port name, from the Services the lab writes it). It has no UI,
// no Kubernetes API client (no namespace list, no health, no Istio config validations):
// docs/ARCHITECTURE.md, "Kiali".

// PersonaKiali is Kiali's graph API over the lab's Prometheus.
const PersonaKiali = "kiali"

// kialiConfigFile is where kiali.yaml's Deployment mounts its ConfigMap (the container's
// -config argument).
const kialiConfigFile = "/kiali-configuration/config.yaml"

// kialiVersion is the sample image's version, which /api reports.
const kialiVersion = "v2.27.0"

// kialiConfig is the part of Kiali's config.yaml the persona acts on; Kiali's defaults
// fill what the file leaves out.
type kialiConfig struct {
	Server struct {
		Port    int    `json:"port"`
		WebRoot string `json:"web_root"`
	} `json:"server"`
	Deployment struct {
		Namespace string `json:"namespace"`
	} `json:"deployment"`
	ExternalServices struct {
		Prometheus struct {
			Enabled *bool  `json:"enabled"`
			URL     string `json:"url"`
		} `json:"prometheus"`
	} `json:"external_services"`
}

// readKialiConfig reads config.yaml below volumeRoot and fills Kiali's defaults: port
// 20001, web root "/", namespace istio-system and Prometheus at
// http://prometheus.<namespace>:9090.
func readKialiConfig(volumeRoot string) (*kialiConfig, error) {
	var c kialiConfig
	if err := readYAMLFile(filepath.Join(volumeRoot, kialiConfigFile), &c); err != nil {
		return nil, err
	}
	c.Server.Port = cmp.Or(c.Server.Port, 20001)
	if c.Server.Port < 1 || c.Server.Port > 65535 {
		return nil, fmt.Errorf("%s: server.port %d is not a port", kialiConfigFile, c.Server.Port)
	}
	c.Server.WebRoot = "/" + strings.Trim(c.Server.WebRoot, "/")
	if strings.Trim(c.Server.WebRoot, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/") != "" || strings.Contains(c.Server.WebRoot, "//") {
		return nil, fmt.Errorf("%s: server.web_root %q is not a URL path of letters, digits and -._~", kialiConfigFile, c.Server.WebRoot)
	}
	c.Deployment.Namespace = cmp.Or(c.Deployment.Namespace, "istio-system")
	if c.ExternalServices.Prometheus.Enabled != nil && !*c.ExternalServices.Prometheus.Enabled {
		return nil, fmt.Errorf("%s: external_services.prometheus.enabled is false: meshlab's Kiali builds its graph from Prometheus only", kialiConfigFile)
	}
	c.ExternalServices.Prometheus.URL = cmp.Or(c.ExternalServices.Prometheus.URL, "http://prometheus."+c.Deployment.Namespace+":9090")
	if u, err := url.Parse(c.ExternalServices.Prometheus.URL); err != nil || u.Host == "" {
		return nil, fmt.Errorf("%s: external_services.prometheus.url %q is not a URL", kialiConfigFile, c.ExternalServices.Prometheus.URL)
	}
	return &c, nil
}

// serveKiali serves Kiali's API on the config's port until ctx ends.
func serveKiali(ctx context.Context, addr string, volumeRoot string, log *slog.Logger) error {
	c, err := readKialiConfig(volumeRoot)
	if err != nil {
		return fmt.Errorf("kiali: %w", err)
	}
	log.Info("kiali", "port", c.Server.Port, "web_root", c.Server.WebRoot, "prometheus", c.ExternalServices.Prometheus.URL)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(c.Server.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	k := &kiali{cfg: c, volumeRoot: volumeRoot, client: &http.Client{Timeout: 30 * time.Second}, now: time.Now}
	srv := &http.Server{Handler: k.handler(), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

type kiali struct {
	cfg        *kialiConfig
	volumeRoot string // where KialiServicesFile is, below its container path
	client     *http.Client
	now        func() time.Time
}

func kialiJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// kialiError is Kiali's error body.
func kialiError(w http.ResponseWriter, code int, msg string) {
	kialiJSON(w, code, map[string]string{"error": msg})
}

func (k *kiali) handler() http.Handler {
	root := strings.TrimSuffix(k.cfg.Server.WebRoot, "/")
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+root+"/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET "+root+"/api", func(w http.ResponseWriter, _ *http.Request) {
		kialiJSON(w, http.StatusOK, map[string]any{
			"status": map[string]string{
				"Kiali commit hash": "meshlab", "Kiali container version": strings.TrimSuffix(kialiVersion, ".0"),
				"Kiali state": "running", "Kiali version": kialiVersion,
			},
			"externalServices": []map[string]string{{"name": "Prometheus", "url": k.cfg.ExternalServices.Prometheus.URL}},
			"warningMessages":  []string{},
		})
	})
	mux.HandleFunc("GET "+root+"/api/namespaces/graph", func(w http.ResponseWriter, r *http.Request) {
		q, err := parseKialiGraphQuery(r.URL.Query(), k.now())
		if err != nil {
			kialiError(w, http.StatusBadRequest, err.Error())
			return
		}
		g, err := k.graph(r.Context(), q)
		if err != nil {
			kialiError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		kialiJSON(w, http.StatusOK, g)
	})
	mux.HandleFunc("GET "+root+"/api/namespaces/{namespace}/services/{service}", k.serviceDetails)
	mux.HandleFunc("GET "+root+"/api/istio/validations", k.validationSummary)
	// The console: meshlab has no UI, so the web root says so and where the graph is,
	// for the reader whose browser opens the URL istioctl dashboard printed.
	console := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintf(w, "meshlab's Kiali (the stand-in for %s) has no console.\n"+
			"Its graph, as the console draws it: %s/api/namespaces/graph?namespaces=NS&graphType=versionedApp&duration=60s&injectServiceNodes=true\n"+
			"(graphType app, versionedApp, workload or service), from the lab's Prometheus at %s.\n",
			"quay.io/kiali/kiali:"+strings.TrimSuffix(kialiVersion, ".0"), root, k.cfg.ExternalServices.Prometheus.URL)
	}
	mux.HandleFunc("GET "+root+"/{$}", console)
	if root != "" {
		mux.HandleFunc("GET "+root, console)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		kialiError(w, http.StatusNotFound, "meshlab's Kiali serves "+root+"/healthz, "+root+"/api, "+root+"/api/namespaces/graph, "+root+"/api/namespaces/NS/services/NAME and "+root+"/api/istio/validations only (no console): "+r.URL.Path)
	})
	return mux
}

// Kiali's graph types.
const (
	kialiApp          = "app"
	kialiVersionedApp = "versionedApp"
	kialiWorkload     = "workload"
	kialiService      = "service"
)

// kialiGraphQuery is what the graph API's parameters ask for.
type kialiGraphQuery struct {
	Namespaces     []string
	GraphType      string
	Duration       time.Duration
	QueryTime      time.Time
	InjectServices bool
	// RateHTTP and RateGRPC are "requests" or "none"; RateTCP "sent", "received",
	// "total" or "none": which metric an edge of the protocol counts.
	RateHTTP, RateGRPC, RateTCP string
	// Security is whether Kiali's securityPolicy appender runs (appenders names it, or
	// appenders is not given): the edges' isMTLS.
	Security bool
}

// parseKialiGraphQuery reads the graph API's parameters as Kiali does: namespaces
// (required, comma-separated), graphType (default workload), duration (default 10m),
// queryTime (Unix seconds, default now), injectServiceNodes (default false; always true
// for a service graph), rateHttp (requests or none), rateGrpc (requests or none: its
// message rates are refused), rateTcp (sent, received, total or none).
func parseKialiGraphQuery(v url.Values, now time.Time) (kialiGraphQuery, error) {
	q := kialiGraphQuery{GraphType: cmp.Or(v.Get("graphType"), kialiWorkload), Duration: 10 * time.Minute, QueryTime: now,
		RateHTTP: cmp.Or(v.Get("rateHttp"), "requests"), RateGRPC: cmp.Or(v.Get("rateGrpc"), "requests"), RateTCP: cmp.Or(v.Get("rateTcp"), "sent")}
	switch {
	case q.RateHTTP != "requests" && q.RateHTTP != "none":
		return q, fmt.Errorf("rateHttp %q: must be one of none, requests", q.RateHTTP)
	case q.RateGRPC == "sent" || q.RateGRPC == "received" || q.RateGRPC == "total":
		return q, fmt.Errorf("rateGrpc %q: meshlab's Kiali counts gRPC requests only (istio_request_messages_total is not drawn): use rateGrpc=requests", q.RateGRPC)
	case q.RateGRPC != "requests" && q.RateGRPC != "none":
		return q, fmt.Errorf("rateGrpc %q: must be one of none, received, requests, sent, total", q.RateGRPC)
	case !slices.Contains([]string{"sent", "received", "total", "none"}, q.RateTCP):
		return q, fmt.Errorf("rateTcp %q: must be one of none, received, sent, total", q.RateTCP)
	}
	q.Security = !v.Has("appenders") || slices.Contains(strings.Split(v.Get("appenders"), ","), "securityPolicy")
	for ns := range strings.SplitSeq(v.Get("namespaces"), ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			if strings.ContainsAny(ns, `"\{}=~!`) {
				return q, fmt.Errorf("namespaces: %q is not a namespace name", ns)
			}
			if !slices.Contains(q.Namespaces, ns) {
				q.Namespaces = append(q.Namespaces, ns)
			}
		}
	}
	if len(q.Namespaces) == 0 {
		return q, errors.New("at least one namespace must be specified via the namespaces query parameter")
	}
	switch q.GraphType {
	case kialiApp, kialiVersionedApp, kialiWorkload, kialiService:
	default:
		return q, fmt.Errorf("graphType %q: must be one of app, service, versionedApp, workload", q.GraphType)
	}
	if d := v.Get("duration"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil || dur < time.Second {
			return q, fmt.Errorf("duration %q: a duration of at least 1s, as 60s or 10m", d)
		}
		q.Duration = dur.Truncate(time.Second)
	}
	if t := v.Get("queryTime"); t != "" {
		sec, err := strconv.ParseInt(t, 10, 64)
		if err != nil || sec <= 0 {
			return q, fmt.Errorf("queryTime %q: Unix seconds", t)
		}
		q.QueryTime = time.Unix(sec, 0)
	}
	if s := v.Get("injectServiceNodes"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("injectServiceNodes %q: true or false", s)
		}
		q.InjectServices = b
	}
	if q.GraphType == kialiService {
		q.InjectServices = true
	}
	return q, nil
}

// kialiSeries is one istio_requests_total (or TCP byte counter) rate, by Kiali's
// grouping labels.
type kialiSeries struct {
	labels map[string]string
	rate   float64
}

// kialiGroupBy is the labels Kiali's graph groups istio_requests_total by.
const kialiGroupBy = "source_cluster,source_workload_namespace,source_workload,source_canonical_service,source_canonical_revision," +
	"destination_cluster,destination_service_namespace,destination_service,destination_service_name," +
	"destination_workload_namespace,destination_workload,destination_canonical_service,destination_canonical_revision," +
	"request_protocol,response_code,grpc_response_status,response_flags"

// kialiTCPGroupBy is the labels Kiali's graph groups the TCP byte counters by.
const kialiTCPGroupBy = "source_cluster,source_workload_namespace,source_workload,source_canonical_service,source_canonical_revision," +
	"destination_cluster,destination_service_namespace,destination_service,destination_service_name," +
	"destination_workload_namespace,destination_workload,destination_canonical_service,destination_canonical_revision," +
	"response_flags"

// promQuery runs an instant query on the configured Prometheus.
func (k *kiali) promQuery(ctx context.Context, query string, at time.Time) ([]kialiSeries, error) {
	u := strings.TrimSuffix(k.cfg.ExternalServices.Prometheus.URL, "/") + "/api/v1/query?" + url.Values{
		"query": {query}, "time": {strconv.FormatInt(at.Unix(), 10)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus at %s: %w", k.cfg.ExternalServices.Prometheus.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("prometheus at %s: %s: %w", k.cfg.ExternalServices.Prometheus.URL, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("prometheus at %s: %s: %s", k.cfg.ExternalServices.Prometheus.URL, resp.Status, body.Error)
	}
	out := make([]kialiSeries, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			continue
		}
		out = append(out, kialiSeries{labels: r.Metric, rate: v})
	}
	return out, nil
}

// Kiali's cytoscape JSON (graph/config/cytoscape).
type (
	kialiServiceName struct {
		Cluster   string `json:"cluster"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	}
	kialiResponseDetail struct {
		Flags map[string]string `json:"flags,omitempty"`
		Hosts map[string]string `json:"hosts,omitempty"`
	}
	kialiTraffic struct {
		Protocol  string                          `json:"protocol,omitempty"`
		Rates     map[string]string               `json:"rates,omitempty"`
		Responses map[string]*kialiResponseDetail `json:"responses,omitempty"`
	}
	kialiNodeData struct {
		ID           string             `json:"id"`
		NodeType     string             `json:"nodeType"`
		Cluster      string             `json:"cluster"`
		Namespace    string             `json:"namespace"`
		Workload     string             `json:"workload,omitempty"`
		App          string             `json:"app,omitempty"`
		Version      string             `json:"version,omitempty"`
		Service      string             `json:"service,omitempty"`
		DestServices []kialiServiceName `json:"destServices,omitempty"`
		Traffic      []kialiTraffic     `json:"traffic,omitempty"`
		IsOutside    bool               `json:"isOutside,omitempty"`
		IsRoot       bool               `json:"isRoot,omitempty"`
	}
	kialiEdgeData struct {
		ID     string       `json:"id"`
		Source string       `json:"source"`
		Target string       `json:"target"`
		Traff  kialiTraffic `json:"traffic"`
		IsMTLS string       `json:"isMTLS,omitempty"` // the percent of its traffic over mutual TLS
	}
	kialiNodeWrapper struct {
		Data *kialiNodeData `json:"data"`
	}
	kialiEdgeWrapper struct {
		Data *kialiEdgeData `json:"data"`
	}
	kialiGraphConfig struct {
		Timestamp int64  `json:"timestamp"`
		Duration  int64  `json:"duration"`
		GraphType string `json:"graphType"`
		Elements  struct {
			Nodes []kialiNodeWrapper `json:"nodes"`
			Edges []kialiEdgeWrapper `json:"edges"`
		} `json:"elements"`
	}
)

// kialiNode is a node while the graph is built: its data and its rates.
type kialiNode struct {
	key   string
	data  kialiNodeData
	rates map[string]float64
	in    int // incoming edges
}

// kialiEdge is an edge while the graph is built.
type kialiEdge struct {
	from, to  *kialiNode
	protocol  string
	rates     map[string]float64
	responses map[string]map[string]map[string]float64 // code -> "flags"/"hosts" -> value -> rate
	// mtls and secured are the securityPolicy appender's rates: over mutual TLS, and all.
	mtls, secured float64
}

type kialiGraphBuilder struct {
	q     kialiGraphQuery
	nodes map[string]*kialiNode
	edges map[string]*kialiEdge
	// policy is set while the securityPolicy appender adds its series: the series'
	// connection_security_policy, added to the edges the traffic drew, none made.
	policy string
}

func kialiHash(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // a name
	return hex.EncodeToString(sum[:])
}

// known is a label's value unless Istio's "unknown" or empty.
func known(v string) bool { return v != "" && v != "unknown" }

func (b *kialiGraphBuilder) node(key string, d kialiNodeData) *kialiNode {
	if n, ok := b.nodes[key]; ok {
		return n
	}
	if b.policy != "" {
		return &kialiNode{key: key, rates: map[string]float64{}} // not drawn: no edge has it
	}
	d.ID = kialiHash(key)
	d.Cluster = cmp.Or(d.Cluster, "Kubernetes")
	n := &kialiNode{key: key, data: d, rates: map[string]float64{}}
	b.nodes[key] = n
	return n
}

// workloadNode is the node of a workload (source or destination) as the graph type
// draws it, as Kiali's graph.Id: nil when the workload is unknown.
func (b *kialiGraphBuilder) workloadNode(cluster, ns, workload, app, version string) *kialiNode {
	if !known(workload) {
		return nil
	}
	if !known(version) {
		version = ""
	}
	if !known(app) {
		app = ""
	}
	switch {
	case b.q.GraphType == kialiWorkload || b.q.GraphType == kialiService || app == "":
		return b.node("wl_"+cluster+"_"+ns+"_"+workload, kialiNodeData{NodeType: "workload", Cluster: cluster, Namespace: ns, Workload: workload, App: app, Version: version})
	case b.q.GraphType == kialiVersionedApp && version != "":
		return b.node("vapp_"+cluster+"_"+ns+"_"+app+"_"+version, kialiNodeData{NodeType: "app", Cluster: cluster, Namespace: ns, Workload: workload, App: app, Version: version})
	default:
		return b.node("app_"+cluster+"_"+ns+"_"+app, kialiNodeData{NodeType: "app", Cluster: cluster, Namespace: ns, App: app})
	}
}

func (b *kialiGraphBuilder) serviceNode(cluster, ns, name string) *kialiNode {
	return b.node("svc_"+cluster+"_"+ns+"_"+name, kialiNodeData{NodeType: "service", Cluster: cluster, Namespace: ns, Service: name})
}

// kialiCodeClass is the rate a response code adds to: http3xx, http4xx, http5xx or
// httpNoResponse (code 0 or "-"), or "" for 1xx/2xx.
func kialiCodeClass(code string) string {
	switch {
	case code == "0" || code == "-" || code == "":
		return "NoResponse"
	case strings.HasPrefix(code, "3") && len(code) == 3:
		return "3xx"
	case strings.HasPrefix(code, "4") && len(code) == 3:
		return "4xx"
	case strings.HasPrefix(code, "5") && len(code) == 3:
		return "5xx"
	}
	return ""
}

func (b *kialiGraphBuilder) edge(from, to *kialiNode, protocol string) *kialiEdge {
	key := from.key + "\x00" + to.key + "\x00" + protocol
	if e, ok := b.edges[key]; ok {
		return e
	}
	e := &kialiEdge{from: from, to: to, protocol: protocol, rates: map[string]float64{}, responses: map[string]map[string]map[string]float64{}}
	b.edges[key] = e
	to.in++
	return e
}

// addTraffic adds one series' rate to the edge from -> to and to both nodes' rates.
func (b *kialiGraphBuilder) addTraffic(from, to *kialiNode, protocol, code, flags, host string, rate float64) {
	if b.policy != "" {
		if e := b.edges[from.key+"\x00"+to.key+"\x00"+protocol]; e != nil {
			e.secured += rate
			if b.policy == "mutual_tls" {
				e.mtls += rate
			}
		}
		return
	}
	e := b.edge(from, to, protocol)
	class := kialiCodeClass(code)
	if protocol == "tcp" {
		class = ""
	}
	e.rates[protocol] += rate
	if class != "" {
		e.rates[protocol+class] += rate
	}
	r := e.responses[code]
	if r == nil {
		r = map[string]map[string]float64{"flags": {}, "hosts": {}}
		e.responses[code] = r
	}
	r["flags"][cmp.Or(flags, "-")] += rate
	if host != "" {
		r["hosts"][host] += rate
	}
	from.rates[protocol+"Out"] += rate
	to.rates[protocol+"In"] += rate
	if class != "" {
		to.rates[protocol+"In"+class] += rate
	}
}

// add places one series in the graph as Kiali does: source -> [service ->] destination,
// the service node standing for the destination when its workload is unknown. A TCP
// byte counter's series is protocol tcp, response code "-"; istio_requests_total's is its
// request_protocol's, http or grpc, unless the query's rate for it is none.
func (b *kialiGraphBuilder) add(s kialiSeries, tcp bool) {
	l := s.labels
	protocol := strings.ToLower(l["request_protocol"])
	if protocol != "grpc" {
		protocol = "http"
	}
	if tcp {
		protocol = "tcp"
	}
	if (protocol == "http" && b.q.RateHTTP == "none") || (protocol == "grpc" && b.q.RateGRPC == "none") {
		return
	}
	code := l["response_code"]
	if tcp {
		code = "-"
	}
	if protocol == "grpc" && l["grpc_response_status"] != "" {
		code = l["grpc_response_status"]
	}
	src := b.workloadNode(l["source_cluster"], l["source_workload_namespace"], l["source_workload"], l["source_canonical_service"], l["source_canonical_revision"])
	if src == nil {
		src = b.node("unknown_source", kialiNodeData{NodeType: "unknown", Namespace: "unknown", Workload: "unknown", App: "unknown"})
	}
	svcNS := cmp.Or(l["destination_service_namespace"], l["destination_workload_namespace"])
	svcName := l["destination_service_name"]
	host := l["destination_service"]
	dst := b.workloadNode(l["destination_cluster"], l["destination_workload_namespace"], l["destination_workload"], l["destination_canonical_service"], l["destination_canonical_revision"])
	if dst == nil && !known(svcName) {
		return // no destination Kiali could draw
	}
	sn := kialiServiceName{Cluster: cmp.Or(l["destination_cluster"], "Kubernetes"), Namespace: svcNS, Name: svcName}
	destServices := func(n *kialiNode) {
		if known(svcName) && !slices.Contains(n.data.DestServices, sn) {
			n.data.DestServices = append(n.data.DestServices, sn)
		}
	}
	if dst != nil {
		destServices(dst)
	}
	if dst != nil && (!known(svcName) || !b.q.InjectServices) {
		b.addTraffic(src, dst, protocol, code, l["response_flags"], host, s.rate)
		return
	}
	svc := b.serviceNode(l["destination_cluster"], svcNS, svcName)
	destServices(svc)
	b.addTraffic(src, svc, protocol, code, l["response_flags"], host, s.rate)
	if dst != nil {
		b.addTraffic(svc, dst, protocol, code, l["response_flags"], host, s.rate)
	}
}

// kialiRate prints a rate as Kiali's rateToString: minPrecision decimals, more (up to
// 5) until one is significant.
func kialiRate(minPrecision int, v float64) string {
	p := 0
	for x := v; p < 5 && x > 0 && x < 1; p++ {
		x *= 10
	}
	return strconv.FormatFloat(v, 'f', max(p, minPrecision), 64)
}

// graph asks Prometheus for the namespaces' traffic, as Kiali's
// buildNamespaceTrafficMap does (requests into a namespace from outside it, as the
// destination reports them; requests from it, as the source reports them), and builds
// the cytoscape config.
func (k *kiali) graph(ctx context.Context, q kialiGraphQuery) (*kialiGraphConfig, error) {
	b := &kialiGraphBuilder{q: q, nodes: map[string]*kialiNode{}, edges: map[string]*kialiEdge{}}
	rng := strconv.FormatInt(int64(q.Duration/time.Second), 10) + "s"
	for _, ns := range q.Namespaces {
		for _, sel := range []string{
			`reporter="destination",source_workload_namespace!="` + ns + `",destination_service_namespace="` + ns + `"`,
			`reporter="source",source_workload_namespace="` + ns + `"`,
		} {
			var queries []string
			if q.RateHTTP != "none" || q.RateGRPC != "none" {
				queries = append(queries, `sum(rate(istio_requests_total{`+sel+`}[`+rng+`])) by (`+kialiGroupBy+`) > 0`)
			}
			for _, m := range map[string][]string{"sent": {"sent"}, "received": {"received"}, "total": {"sent", "received"}}[q.RateTCP] {
				queries = append(queries, `sum(rate(istio_tcp_`+m+`_bytes_total{`+sel+`}[`+rng+`])) by (`+kialiTCPGroupBy+`) > 0`)
			}
			for _, query := range queries {
				series, err := k.promQuery(ctx, query, q.QueryTime)
				if err != nil {
					return nil, err
				}
				for _, s := range series {
					b.add(s, strings.Contains(query, "istio_tcp_"))
				}
			}
		}
	}
	if q.Security {
		if err := k.securityPolicy(ctx, b, rng); err != nil {
			return nil, err
		}
	}
	cfg := &kialiGraphConfig{Timestamp: q.QueryTime.Unix(), Duration: int64(q.Duration / time.Second), GraphType: q.GraphType}
	cfg.Elements.Nodes = []kialiNodeWrapper{}
	cfg.Elements.Edges = []kialiEdgeWrapper{}
	for _, n := range b.nodes {
		d := n.data
		d.IsOutside = d.NodeType != "unknown" && !slices.Contains(q.Namespaces, d.Namespace)
		d.IsRoot = n.in == 0
		for _, proto := range []string{"http", "grpc", "tcp"} {
			t := kialiTraffic{Protocol: proto, Rates: map[string]string{}}
			for _, r := range []string{"In", "In3xx", "In4xx", "In5xx", "InNoResponse", "Out"} {
				if v := n.rates[proto+r]; v > 0 {
					t.Rates[proto+r] = kialiRate(2, v)
				}
			}
			if len(t.Rates) > 0 {
				d.Traffic = append(d.Traffic, t)
			}
		}
		cfg.Elements.Nodes = append(cfg.Elements.Nodes, kialiNodeWrapper{Data: &d})
	}
	for _, e := range b.edges {
		p := e.protocol
		total := e.rates[p]
		t := kialiTraffic{Protocol: p, Rates: map[string]string{}, Responses: map[string]*kialiResponseDetail{}}
		for _, r := range []string{"", "3xx", "4xx", "5xx", "NoResponse"} {
			if v := e.rates[p+r]; v > 0 {
				t.Rates[p+r] = kialiRate(2, v)
			}
		}
		if errs := e.rates[p+"4xx"] + e.rates[p+"5xx"] + e.rates[p+"NoResponse"]; errs > 0 {
			t.Rates[p+"PercentErr"] = strconv.FormatFloat(errs/total*100, 'f', 1, 64)
		}
		if out := e.from.rates[p+"Out"]; out > 0 && p != "tcp" {
			t.Rates[p+"PercentReq"] = strconv.FormatFloat(total/out*100, 'f', 1, 64)
		}
		for code, r := range e.responses {
			rd := &kialiResponseDetail{Flags: map[string]string{}, Hosts: map[string]string{}}
			for f, v := range r["flags"] {
				rd.Flags[f] = strconv.FormatFloat(v/total*100, 'f', 1, 64)
			}
			for h, v := range r["hosts"] {
				rd.Hosts[h] = strconv.FormatFloat(v/total*100, 'f', 1, 64)
			}
			t.Responses[code] = rd
		}
		from, to := kialiHash(e.from.key), kialiHash(e.to.key)
		ed := &kialiEdgeData{ID: kialiHash(from + "." + to + "." + p), Source: from, Target: to, Traff: t}
		if e.mtls > 0 {
			ed.IsMTLS = strconv.FormatFloat(e.mtls/e.secured*100, 'f', 0, 64)
		}
		cfg.Elements.Edges = append(cfg.Elements.Edges, kialiEdgeWrapper{Data: ed})
	}
	// Kiali sorts for a stable answer: nodes by namespace, app, version, service,
	// workload; edges by source, target.
	slices.SortFunc(cfg.Elements.Nodes, func(a, b kialiNodeWrapper) int {
		x, y := a.Data, b.Data
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.App, y.App), cmp.Compare(x.Version, y.Version),
			cmp.Compare(x.Service, y.Service), cmp.Compare(x.Workload, y.Workload))
	})
	slices.SortFunc(cfg.Elements.Edges, func(a, b kialiEdgeWrapper) int {
		return cmp.Or(cmp.Compare(a.Data.Source, b.Data.Source), cmp.Compare(a.Data.Target, b.Data.Target))
	})
	return cfg, nil
}

// KialiServicesFile is where, below the kiali pod's volume root, the lab writes its
// Services (lab/kialiaddon.go): Kiali reads them from the Kubernetes API, which a lab
// does not serve to pods.
const KialiServicesFile = "/var/run/meshlab/kiali/services.json"

// KialiService is one Service as the kiali persona's validations read it.
type KialiService struct {
	Namespace string             `json:"namespace"`
	Name      string             `json:"name"`
	Labels    map[string]string  `json:"labels,omitempty"`
	Ports     []KialiServicePort `json:"ports"`
	// Sidecar reports whether a pod the Service selects has a sidecar: Kiali checks
	// the port names of such Services only.
	Sidecar bool `json:"sidecar"`
}

// KialiServicePort is one port of a KialiService.
type KialiServicePort struct {
	Name        string `json:"name"`
	Port        int    `json:"port"`
	AppProtocol string `json:"appProtocol,omitempty"`
}

func (k *kiali) services() ([]KialiService, error) {
	var out []KialiService
	raw, err := os.ReadFile(filepath.Join(k.volumeRoot, KialiServicesFile))
	if err != nil {
		return nil, fmt.Errorf("the lab's Services: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("the lab's Services %s: %w", KialiServicesFile, err)
	}
	return out, nil
}

// kialiPortProtocols are the protocols Kiali's MatchPortNameWithValidProtocols accepts
// as a port name's prefix.
var kialiPortProtocols = []string{"grpc", "grpc-web", "http", "http2", "https", "mongo", "redis", "tcp", "tls", "udp", "mysql"}

// kialiCheck is one of Kiali's validation checks.
type kialiCheck struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Severity string `json:"severity"`
	Path     string `json:"path"`
}

// kialiValidation is Kiali's IstioValidation of one object.
type kialiValidation struct {
	Name       string            `json:"name"`
	Namespace  string            `json:"namespace"`
	Cluster    string            `json:"cluster"`
	ObjectGVK  map[string]string `json:"objectGVK"`
	Valid      bool              `json:"valid"`
	Checks     []kialiCheck      `json:"checks"`
	References []any             `json:"references"`
}

// validateService is Kiali's PortMappingChecker's port name check: a Service whose pods
// have a sidecar names each port (that has no appProtocol) <protocol>[-suffix]
// (KIA0601, a warning).
func validateService(s KialiService) kialiValidation {
	v := kialiValidation{Name: s.Name, Namespace: s.Namespace, Cluster: "Kubernetes",
		ObjectGVK: map[string]string{"Group": "", "Version": "v1", "Kind": "Service"}, Valid: true, Checks: []kialiCheck{}, References: []any{}}
	if !s.Sidecar || s.Labels["kiali_wizard"] != "" {
		return v
	}
	for i, p := range s.Ports {
		if p.AppProtocol != "" {
			continue
		}
		name := strings.ToLower(p.Name)
		if slices.ContainsFunc(kialiPortProtocols, func(proto string) bool { return name == proto || strings.HasPrefix(name, proto+"-") }) {
			continue
		}
		v.Checks = append(v.Checks, kialiCheck{Code: "KIA0601", Message: "Port name must follow <protocol>[-suffix] form", Severity: "warning", Path: fmt.Sprintf("spec/ports[%d]", i)})
	}
	v.Valid = len(v.Checks) == 0 // as the checker's Check returns it
	return v
}

// serviceDetails is Kiali's service details, as far as its Service and (with
// validate=true) its validations.
func (k *kiali) serviceDetails(w http.ResponseWriter, r *http.Request) {
	svcs, err := k.services()
	if err != nil {
		kialiError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("service")
	for _, s := range svcs {
		if s.Namespace != ns || s.Name != name {
			continue
		}
		ports := []map[string]any{}
		for _, p := range s.Ports {
			pm := map[string]any{"name": p.Name, "port": p.Port, "protocol": "TCP"}
			if p.AppProtocol != "" {
				pm["appProtocol"] = p.AppProtocol
			}
			ports = append(ports, pm)
		}
		validations := map[string]map[string]kialiValidation{}
		if r.URL.Query().Get("validate") == "true" {
			validations["service"] = map[string]kialiValidation{s.Name: validateService(s)}
		}
		kialiJSON(w, http.StatusOK, map[string]any{
			"cluster":      "Kubernetes",
			"service":      map[string]any{"name": s.Name, "namespace": s.Namespace, "labels": s.Labels, "ports": ports},
			"istioSidecar": s.Sidecar,
			"validations":  validations,
		})
		return
	}
	kialiError(w, http.StatusNotFound, fmt.Sprintf("Service details: services %q not found", name))
}

// validationSummary is Kiali's summary of the validations of the namespaces' objects,
// per cluster and namespace: the Services' only (meshlab's Kiali validates no Istio
// config).
func (k *kiali) validationSummary(w http.ResponseWriter, r *http.Request) {
	var namespaces []string
	for ns := range strings.SplitSeq(r.URL.Query().Get("namespaces"), ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	if len(namespaces) == 0 {
		kialiError(w, http.StatusBadRequest, "at least one namespace must be specified via the namespaces query parameter")
		return
	}
	svcs, err := k.services()
	if err != nil {
		kialiError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	type summary struct {
		Errors      int `json:"errors"`
		ObjectCount int `json:"objectCount"`
		Warnings    int `json:"warnings"`
	}
	out := map[string]*summary{}
	for _, ns := range namespaces {
		out[ns] = &summary{}
	}
	for _, s := range svcs {
		sum := out[s.Namespace]
		if sum == nil {
			continue
		}
		sum.ObjectCount++
		for _, c := range validateService(s).Checks {
			if c.Severity == "error" {
				sum.Errors++
			} else {
				sum.Warnings++
			}
		}
	}
	kialiJSON(w, http.StatusOK, map[string]any{"Kubernetes": out})
}

// securityPolicy is Kiali's securityPolicy appender: the destination-reported rates by
// connection_security_policy of the namespaces' traffic (into them, and out of them to
// other namespaces), added to the edges the traffic drew, which get isMTLS, the percent
// over mutual TLS.
func (k *kiali) securityPolicy(ctx context.Context, b *kialiGraphBuilder, rng string) error {
	defer func() { b.policy = "" }()
	for _, ns := range b.q.Namespaces {
		for _, sel := range []string{
			`reporter="destination",destination_service_namespace="` + ns + `"`,
			`reporter="destination",source_workload_namespace="` + ns + `",destination_service_namespace!="` + ns + `"`,
		} {
			queries := []string{`sum(rate(istio_requests_total{` + sel + `}[` + rng + `])) by (` + kialiGroupBy + `,connection_security_policy) > 0`}
			if b.q.RateTCP != "none" {
				queries = append(queries, `sum(rate(istio_tcp_sent_bytes_total{`+sel+`}[`+rng+`])) by (`+kialiTCPGroupBy+`,connection_security_policy) > 0`)
			}
			for _, query := range queries {
				series, err := k.promQuery(ctx, query, b.q.QueryTime)
				if err != nil {
					return err
				}
				for _, s := range series {
					b.policy = cmp.Or(s.labels["connection_security_policy"], "unknown")
					b.add(s, strings.Contains(query, "istio_tcp_"))
				}
			}
		}
	}
	return nil
}
