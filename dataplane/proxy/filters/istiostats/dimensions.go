package istiostats

import (
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// A MetricConfig's dimensions, as istio-proxy's MetricOverrides applies them: each
// value is a CEL expression over Envoy's request attributes (request.host,
// destination.port, ...) and the peers' metadata (upstream_peer, downstream_peer), parsed
// once (not type-checked: an unknown attribute is an evaluation error, as in istio-proxy)
// and evaluated once per request. A dimension naming a standard tag replaces its value
// (an expression that does not parse drops the tag); another tag is added after the
// standard ones, in the order of the tag names (one that does not parse is left out). A
// failed evaluation reports "unknown". The Telemetry API's tagOverrides arrive here:
// istiod turns an UPSERT into a dimension and a REMOVE into tags_to_remove.

// celEnv is the environment the expressions are parsed in: the attributes are
// untyped, as Envoy's activation resolves them by name at evaluation. It is built on
// first use: at init it cost every process of the binary 24 KB (initcost_test.go).
var celEnv = sync.OnceValue(func() *cel.Env {
	var opts []cel.EnvOption
	for _, n := range attributeNames {
		opts = append(opts, cel.Variable(n, cel.DynType))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		panic(fmt.Sprintf("istio.stats CEL environment: %v", err)) // constant declarations
	}
	return env
})

// attributeNames are the top-level attributes an expression may read: Envoy's request
// attributes, its xDS attributes and istio-proxy's peer metadata filter state.
var attributeNames = []string{"request", "response", "source", "destination", "connection", "upstream", "xds",
	"upstream_peer", "downstream_peer", "route_name", "cluster_name"}

// dimensions are a metric's compiled dimensions.
type dimensions struct {
	// override maps a standard tag to the index of its expression, -1 when the
	// expression did not parse (the tag is dropped).
	override map[string]int
	// add are the non-standard tags, sorted, with their expressions' indexes.
	add []addedTag
}

type addedTag struct {
	name string
	expr int
}

// exprSet holds each distinct expression once, as istio-proxy's expression ids.
type exprSet struct {
	progs []cel.Program
	ids   map[string]int
}

// compile returns the index of expr, compiling it the first time; -1 when it does not
// parse.
func (s *exprSet) compile(expr string) int {
	if id, ok := s.ids[expr]; ok {
		return id
	}
	id := -1
	if ast, iss := celEnv().Parse(expr); iss.Err() == nil {
		if prg, err := celEnv().Program(ast); err == nil {
			s.progs = append(s.progs, prg)
			id = len(s.progs) - 1
		}
	}
	if s.ids == nil {
		s.ids = map[string]int{}
	}
	s.ids[expr] = id
	return id
}

// ParseDimension reports whether expr parses as a dimension's expression: the
// Telemetry API's check of a tagOverride's value before istiod sends it.
func ParseDimension(expr string) error {
	if _, iss := celEnv().Parse(expr); iss.Err() != nil {
		return iss.Err()
	}
	return nil
}

// addDimensions compiles the dimensions of one MetricConfig into the metrics names.
func (c *Config) addDimensions(names []string, dims map[string]string) {
	tags := make([]string, 0, len(dims))
	for t := range dims {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		id := c.exprs.compile(dims[t])
		for _, n := range names {
			d := c.dims[n]
			if d == nil {
				d = &dimensions{override: map[string]int{}}
				c.dims[n] = d
			}
			switch {
			case standardTags[t]:
				d.override[t] = id
			case id >= 0:
				d.add = append(d.add, addedTag{name: t, expr: id})
			}
		}
	}
}

// HasDimensions reports whether a request's metrics depend on its attributes, which
// RecordHTTP then needs in Request.Attrs.
func (c *Config) HasDimensions() bool { return len(c.exprs.progs) > 0 }

// Attributes are the request attributes the dimensions' expressions read.
type Attributes struct {
	Request  *http.Request
	Scheme   string
	Response http.Header
	// Local is the downstream connection's destination (the restored original
	// destination of a captured connection), Remote its source, Upstream the host that
	// answered (invalid when none did).
	Local, Remote, Upstream netip.AddrPort
	Cluster, Route          string
	// DownstreamPeer and UpstreamPeer are the peers metadata exchange found, nil for
	// none.
	DownstreamPeer, UpstreamPeer *peer.Workload
	MTLS                         bool
	ServerName                   string
}

// activation builds the attribute values of one request as Envoy's CEL activation
// names them.
func (a *Attributes) activation(r *Request) map[string]any {
	out := map[string]any{
		"xds":          map[string]any{"cluster_name": a.Cluster, "route_name": a.Route},
		"cluster_name": a.Cluster,
		"route_name":   a.Route,
		"connection":   map[string]any{"mtls": a.MTLS, "requested_server_name": a.ServerName},
		"response": map[string]any{
			"code": int64(r.Code), "headers": headerMap(a.Response), "size": r.ResponseBytes,
			"grpc_status": r.GRPCStatus,
		},
	}
	if q := a.Request; q != nil {
		path := q.URL.RequestURI()
		out["request"] = map[string]any{
			"host": q.Host, "path": path, "url_path": q.URL.Path, "query": q.URL.RawQuery, "method": q.Method,
			"scheme": a.Scheme, "protocol": q.Proto, "headers": headerMap(q.Header), "id": q.Header.Get("X-Request-Id"),
			"useragent": q.UserAgent(), "referer": q.Referer(), "size": r.RequestBytes, "duration": r.Duration,
			"time": time.Now().Add(-r.Duration),
		}
	}
	if a.Local.IsValid() {
		out["destination"] = map[string]any{"address": a.Local.String(), "port": int64(a.Local.Port())}
	}
	if a.Remote.IsValid() {
		out["source"] = map[string]any{"address": a.Remote.String(), "port": int64(a.Remote.Port())}
	}
	if a.Upstream.IsValid() {
		out["upstream"] = map[string]any{"address": a.Upstream.String(), "port": int64(a.Upstream.Port())}
	}
	if a.DownstreamPeer != nil {
		out["downstream_peer"] = peerNode(a.DownstreamPeer)
	}
	if a.UpstreamPeer != nil {
		out["upstream_peer"] = peerNode(a.UpstreamPeer)
	}
	return out
}

// peerNode is a peer as istio-proxy's FlatNode reads in CEL: labels is a map of
// KeyVal tables keyed by key, so a label's value is labels['app'].value.
func peerNode(w *peer.Workload) map[string]any {
	labels := map[string]any{}
	kv := func(k, v string) { labels[k] = map[string]any{"key": k, "value": v} }
	kv(peer.LabelCanonicalName, w.CanonicalName)
	kv(peer.LabelCanonicalRevision, w.CanonicalRevision)
	kv("app", w.App)
	kv("version", w.Version)
	for k, v := range w.Labels {
		kv(k, v)
	}
	return map[string]any{"name": w.Name, "namespace": w.Namespace, "cluster_id": w.Cluster,
		"workload_name": w.WorkloadName, "owner": w.Owner, "labels": labels}
}

// headerMap is headers as Envoy's attribute map: lower-case names, values joined by
// commas.
func headerMap(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		out[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	return out
}

// evaluate evaluates every expression for one request: its printed value, "unknown"
// when evaluation fails.
func (c *Config) evaluate(r *Request) []string {
	vals := make([]string, len(c.exprs.progs))
	var act map[string]any
	if r.Attrs != nil {
		act = r.Attrs.activation(r)
	} else {
		act = map[string]any{}
	}
	for i, p := range c.exprs.progs {
		v, _, err := p.Eval(act)
		if err != nil || types.IsError(v) {
			vals[i] = "unknown"
			continue
		}
		vals[i] = printValue(v)
	}
	return vals
}

// printValue prints a CEL value as Envoy's Expr::print: strings as they are, numbers
// in decimal, booleans as true/false.
func printValue(v ref.Val) string {
	switch x := v.Value().(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case time.Duration:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// applyDimensions returns metric's tags with its dimensions applied to them.
func (c *Config) applyDimensions(metric string, tags []stats.Tag, vals []string) []stats.Tag {
	d := c.dims[metric]
	if d == nil {
		return tags
	}
	out := make([]stats.Tag, 0, len(tags)+len(d.add))
	for _, t := range tags {
		id, ok := d.override[t.Name]
		switch {
		case !ok:
			out = append(out, t)
		case id >= 0:
			out = append(out, stats.Tag{Name: t.Name, Value: vals[id]})
		}
	}
	for _, a := range d.add {
		out = append(out, stats.Tag{Name: a.name, Value: vals[a.expr]})
	}
	return out
}
