// Package admin serves the proxy's Envoy-compatible admin API: /ready, /server_info,
// /config_dump, /stats (text, json, prometheus), /clusters (text, json), /listeners,
// /certs, /quitquitquit, /healthcheck/fail|ok, /drain_listeners and /logging, with
// Envoy's status codes and
// bodies (POST-only paths refuse GET with 405, unknown paths get 404 and the help text).
package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Backend is what the admin API reads and controls. Implementations must be safe for
// concurrent use; no method may block for long.
type Backend interface {
	ServerInfo() *adminv3.ServerInfo
	ConfigDump(includeEDS bool) *adminv3.ConfigDump
	Stats() *stats.Store // refreshed server.* gauges before returning
	WriteClusters(w io.Writer)
	Quit()
	SetHealthCheckFailed(failed bool)
	DrainListeners(inboundOnly, graceful, skipExit bool)
	Logging(query map[string][]string) (string, error)
}

// stateBackend is a Backend that tells its state without building the whole
// ServerInfo: /ready is what a pod's agent and kubelet's probes ask, on every pod, all
// the time.
type stateBackend interface {
	State() adminv3.ServerInfo_State
}

type endpoint struct {
	help    string
	mutates bool
	handle  func(w http.ResponseWriter, r *http.Request)
}

// Handler routes admin requests to a Backend.
type Handler struct {
	b         Backend
	endpoints map[string]endpoint
}

// NewHandler returns the admin API over b.
func NewHandler(b Backend) *Handler {
	h := &Handler{b: b}
	h.endpoints = map[string]endpoint{
		"/ready":               {help: "print server state, return 200 if LIVE, otherwise return 503", handle: h.ready},
		"/server_info":         {help: "print server version/status information", handle: h.serverInfo},
		"/config_dump":         {help: "dump current Envoy configs (experimental)", handle: h.configDump},
		"/stats":               {help: "print server stats", handle: h.stats},
		"/stats/prometheus":    {help: "print server stats in prometheus format", handle: h.prometheus},
		"/clusters":            {help: "upstream cluster status", handle: h.clusters},
		"/quitquitquit":        {help: "exit the server", mutates: true, handle: h.quit},
		"/healthcheck/fail":    {help: "cause the server to fail health checks", mutates: true, handle: h.healthFail},
		"/healthcheck/ok":      {help: "cause the server to pass health checks", mutates: true, handle: h.healthOK},
		"/drain_listeners":     {help: "drain listeners", mutates: true, handle: h.drain},
		"/logging":             {help: "query/change logging levels", mutates: true, handle: h.logging},
		"/hot_restart_version": {help: "print the hot restart compatibility version", handle: h.hotRestartVersion},
		"/help":                {help: "print out list of admin commands", handle: h.help},
		"/":                    {help: "Admin home page", handle: h.help},
	}
	if cb, ok := b.(CertsBackend); ok {
		h.endpoints["/certs"] = endpoint{help: "print certs on machine", handle: func(w http.ResponseWriter, _ *http.Request) {
			writeProto(w, cb.Certs())
		}}
	}
	if lb, ok := b.(ListenersBackend); ok {
		h.endpoints["/listeners"] = endpoint{help: "print listener info", handle: func(w http.ResponseWriter, r *http.Request) {
			listeners(w, r, lb.Listeners())
		}}
	}
	return h
}

// ListenersBackend is implemented by a Backend that serves /listeners.
type ListenersBackend interface {
	Listeners() *adminv3.Listeners
}

// ClustersJSONBackend is implemented by a Backend that serves /clusters?format=json.
type ClustersJSONBackend interface {
	Clusters() *adminv3.Clusters
}

// listeners writes Envoy's /listeners: "<name>::<address>" lines, or with ?format=json
// the envoy.admin.v3.Listeners message.
func listeners(w http.ResponseWriter, r *http.Request, ls *adminv3.Listeners) {
	if r.URL.Query().Get("format") == "json" {
		writeProto(w, ls)
		return
	}
	var b strings.Builder
	for _, l := range ls.GetListenerStatuses() {
		sa := l.GetLocalAddress().GetSocketAddress()
		fmt.Fprintf(&b, "%s::%s\n", l.GetName(), net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10)))
	}
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	_, _ = io.WriteString(w, b.String())
}

// CertsBackend is implemented by a Backend that serves /certs.
type CertsBackend interface {
	Certs() *adminv3.Certificates
}

// ServeHTTP answers one admin request: 404 with the help text for an unknown path, 405
// for GET on a path that changes server state, else the endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep, ok := h.endpoints[r.URL.Path]
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "invalid path. "+h.helpText())
		return
	}
	if ep.mutates && r.Method != http.MethodPost {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = fmt.Fprintf(w, "Method %s not allowed, POST required.", r.Method)
		return
	}
	ep.handle(w, r)
}

func (h *Handler) helpText() string {
	paths := make([]string, 0, len(h.endpoints))
	for p := range h.endpoints {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("admin commands are:\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "  %s: %s\n", p, h.endpoints[p].help)
	}
	return b.String()
}

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func (h *Handler) help(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, h.helpText()) }

// hotRestartVersion answers /hot_restart_version with the same string as
// /server_info's hot_restart_version, as Envoy.
func (h *Handler) hotRestartVersion(w http.ResponseWriter, _ *http.Request) {
	text(w, http.StatusOK, h.b.ServerInfo().GetHotRestartVersion())
}

func (h *Handler) ready(w http.ResponseWriter, _ *http.Request) {
	var st adminv3.ServerInfo_State
	if sb, ok := h.b.(stateBackend); ok {
		st = sb.State()
	} else {
		st = h.b.ServerInfo().GetState()
	}
	code := http.StatusOK
	if st != adminv3.ServerInfo_LIVE {
		code = http.StatusServiceUnavailable
	}
	text(w, code, st.String()+"\n")
}

var jsonOpts = protojson.MarshalOptions{UseProtoNames: true}

// MarshalJSON renders m as Envoy's admin API does: proto field names, pretty printed
// with a one-space indent. protojson's output is deliberately unstable in whitespace, so
// it is re-indented.
func MarshalJSON(m proto.Message) ([]byte, error) { return marshalJSON(jsonOpts, m) }

// serverInfoOpts prints zero-valued scalars ("state": "LIVE", "restart_epoch": 0), as
// Envoy's /server_info does (always_print_primitive_fields).
var serverInfoOpts = protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}

func marshalJSON(opts protojson.MarshalOptions, m proto.Message) ([]byte, error) {
	data, err := opts.Marshal(m)
	if err != nil {
		// An Any of a type the proxy does not link: render it opaque rather than fail.
		r := &opaqueResolver{}
		c, rerr := r.withOpaqueAnys(m)
		if rerr != nil {
			return nil, fmt.Errorf("marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), errors.Join(err, rerr))
		}
		opts.Resolver = r
		if data, err = opts.Marshal(c); err != nil {
			return nil, fmt.Errorf("marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", " "); err != nil {
		return nil, fmt.Errorf("indent %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func writeProto(w http.ResponseWriter, m proto.Message) { writeProtoWith(w, jsonOpts, m) }

func writeProtoWith(w http.ResponseWriter, opts protojson.MarshalOptions, m proto.Message) {
	data, err := marshalJSON(opts, m)
	if err != nil {
		text(w, http.StatusInternalServerError, err.Error()+"\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (h *Handler) serverInfo(w http.ResponseWriter, _ *http.Request) {
	writeProtoWith(w, serverInfoOpts, h.b.ServerInfo())
}

func (h *Handler) configDump(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dump := h.b.ConfigDump(q.Has("include_eds"))
	res := q.Get("resource")
	if res == "" {
		writeProto(w, dump)
		return
	}
	out, err := selectResource(dump, res)
	if err != nil {
		text(w, http.StatusNotFound, err.Error())
		return
	}
	writeProto(w, out)
}

func (h *Handler) filter(w http.ResponseWriter, r *http.Request) (stats.Filter, bool) {
	q := r.URL.Query()
	f := stats.Filter{UsedOnly: q.Has("usedonly")}
	switch b := q.Get("histogram_buckets"); b {
	case "", "none":
	case stats.BucketsCumulative, stats.BucketsDisjoint:
		f.Buckets = b
	default:
		text(w, http.StatusBadRequest, "usage: /stats?histogram_buckets=(cumulative|disjoint|none)\n")
		return f, false
	}
	if pat := q.Get("filter"); pat != "" {
		re, err := regexp.Compile(pat)
		if err != nil {
			text(w, http.StatusBadRequest, fmt.Sprintf("Invalid re2 regex: %v\n", err))
			return f, false
		}
		f.Regexp = re
	}
	return f, true
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	f, ok := h.filter(w, r)
	if !ok {
		return
	}
	st := h.b.Stats()
	switch r.URL.Query().Get("format") {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		_ = st.WriteJSON(w, f)
	case "prometheus":
		h.prometheus(w, r)
	case "", "text":
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		_ = st.WriteText(w, f)
	default:
		text(w, http.StatusNotFound, "usage: /stats?format=(html|active-html|json|prometheus|text)\n")
	}
}

func (h *Handler) prometheus(w http.ResponseWriter, r *http.Request) {
	f, ok := h.filter(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_ = h.b.Stats().WritePrometheus(w, f)
}

func (h *Handler) clusters(w http.ResponseWriter, r *http.Request) {
	if cb, ok := h.b.(ClustersJSONBackend); ok && r.URL.Query().Get("format") == "json" {
		writeProto(w, cb.Clusters())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	h.b.WriteClusters(w)
}

func (h *Handler) quit(w http.ResponseWriter, _ *http.Request) {
	text(w, http.StatusOK, "OK\n")
	// The answer goes out before the server starts closing its connections, as Envoy
	// answers before it shuts down: the caller gets OK, not a cut connection.
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	h.b.Quit()
}

func (h *Handler) healthFail(w http.ResponseWriter, _ *http.Request) {
	h.b.SetHealthCheckFailed(true)
	text(w, http.StatusOK, "OK\n")
}

func (h *Handler) healthOK(w http.ResponseWriter, _ *http.Request) {
	h.b.SetHealthCheckFailed(false)
	text(w, http.StatusOK, "OK\n")
}

func (h *Handler) drain(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("skip_exit") && !q.Has("graceful") {
		text(w, http.StatusBadRequest, "skip_exit requires graceful\n")
		return
	}
	h.b.DrainListeners(q.Has("inboundonly"), q.Has("graceful"), q.Has("skip_exit"))
	text(w, http.StatusOK, "OK\n")
}

func (h *Handler) logging(w http.ResponseWriter, r *http.Request) {
	out, err := h.b.Logging(r.URL.Query())
	if err != nil {
		text(w, http.StatusBadRequest, err.Error()+"\nusage: /logging?<name>=<level> (change single level)\n"+
			"usage: /logging?paths=name1:level1,name2:level2,... (change multiple levels)\n"+
			"usage: /logging?level=<level> (change all levels)\n"+
			"levels: trace debug info warning error critical off\n")
		return
	}
	text(w, http.StatusOK, out)
}
