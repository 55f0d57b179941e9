package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/observe"
)

// traceTimeout bounds one traced request and each admin read around it.
const traceTimeout = 5 * time.Second

// podSnapshot is what a trace reads from one pod before and after its request.
type podSnapshot struct {
	rules []savedRule
	stats map[string]uint64
}

// traceAnswer is what the traced request got back.
type traceAnswer struct {
	status   int
	duration time.Duration
	header   http.Header
	app      struct {
		Pod       string            `json:"pod"`
		Namespace string            `json:"namespace"`
		Version   string            `json:"version"`
		Headers   map[string]string `json:"headers"`
	}
	err error
	// local is the traced connection's own address in the pod's namespace (ztunnel's
	// outbound access log line names it as src.addr).
	local netip.AddrPort
}

// ambient reports whether p is in ambient mode (its traffic goes through ztunnel).
func ambient(m *model.Model, p *model.Pod) bool {
	return p != nil && model.DataplaneMode(m, p) == model.DataplaneAmbient
}

// Trace is the lab's web.Tracer: it snapshots every sidecar pod's capture counters and
// proxy stats, sends one GET tagged with a unique x-request-id from the pod's namespace
// (captured like the app's traffic), snapshots again and explains the request's path from
// the deltas, the proxies' config_dump (with the origin metadata of each resource) and
// the demo app's echo of the request (x-forwarded-client-cert tells mTLS and identities).
func Trace(ctx context.Context, d Deps, r api.TraceRequest) (api.TraceResult, error) {
	if err := r.Validate(); err != nil {
		return api.TraceResult{}, fmt.Errorf("%w: %w", api.ErrBadTraffic, err)
	}
	m := d.Model()
	p := m.Pod(r.Pod)
	if p == nil {
		names := make([]string, 0, len(m.Pods))
		for _, q := range m.Pods {
			names = append(names, q.Key())
		}
		return api.TraceResult{}, fmt.Errorf("pod %q: %w (pods: %s)", r.Pod, api.ErrUnknownPod, strings.Join(names, ", "))
	}
	u, err := parseTraceTarget(r.Target)
	if err != nil {
		return api.TraceResult{}, fmt.Errorf("%w: %w", api.ErrBadTraffic, err)
	}
	target, err := observe.ResolveTarget(m, p, u)
	if err != nil {
		return api.TraceResult{}, fmt.Errorf("%w: target %q does not resolve: %w", api.ErrBadTraffic, r.Target, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*traceTimeout)
	defer cancel()
	id := newRequestID()
	before := snapshotPods(ctx, d, m)
	zlog := ztunnelLogFrom(d) // trace_ambient.go
	ans := sendTraced(ctx, d, p, target, u.String(), id)
	after := snapshotPods(ctx, d, m)

	res := api.TraceResult{Pod: p.Key(), URL: u.String(), RequestID: id, Address: target.String(),
		Status: ans.status, DurationMs: observe.Ms(ans.duration), Hops: []api.TraceHop{}}
	if ans.err != nil {
		res.Error = ans.err.Error()
	}
	dst := destinationPod(m, ans, before, after)
	xfcc := headerValue(ans.app.Headers, "x-forwarded-client-cert")
	inPort := inboundPort(dst, before, after)
	logs := traceAccessLogs(ctx, d, m.Mesh.AccessLogPath(), id, p, dst)
	srcAmbient, dstAmbient := ambient(m, p), ambient(m, dst)
	zl := findZtunnelLines(ctx, zlog, ans.local, p, srcAmbient, dstAmbient, dst)
	if dst == nil && zl.outbound != nil { // an app that does not echo: ztunnel's line names the pod
		dst = m.Pod(model.PodKey(zl.outbound.Fields["dst.namespace"], zl.outbound.Fields["dst.workload"]))
		if dstAmbient = ambient(m, dst); dstAmbient {
			zl = findZtunnelLines(ctx, zlog, ans.local, p, srcAmbient, true, dst)
		}
	}
	z := d.Ztunnel()

	src := captureHop(p.Key(), before[p.Key()], after[p.Key()], true)
	if srcAmbient {
		src.Notes = ambientCaptureNote(true)
	}
	res.Hops = append(res.Hops, src)
	switch {
	case p.Sidecar.Inject:
		res.Hops = append(res.Hops, outboundHop(ctx, d, p, u, target, dst, inPort, xfcc, ans, before[p.Key()], after[p.Key()], logs[p.Key()]))
	case srcAmbient && z != nil:
		res.Hops = append(res.Hops, ztunnelHop(z, p, "outbound", zl.outbound))
	}
	if dst != nil {
		in := captureHop(dst.Key(), before[dst.Key()], after[dst.Key()], false)
		if dstAmbient { // ztunnel's dial to the app walks the pod's OUTPUT chains too
			in.Rules = ruleDeltas(before[dst.Key()].rules, after[dst.Key()].rules)
			in.Notes = ambientCaptureNote(false)
		}
		if len(in.Rules) == 0 && p.Sidecar.Inject && dst.Sidecar.Inject && ans.err == nil {
			in.Notes = pooledNote(p.Key(), dst.Key())
		}
		res.Hops = append(res.Hops, in)
		switch {
		case dst.Sidecar.Inject:
			res.Hops = append(res.Hops, inboundHop(ctx, d, dst, inPort, xfcc, before[dst.Key()], after[dst.Key()], logs[dst.Key()]))
		case dstAmbient && z != nil:
			res.Hops = append(res.Hops, ztunnelHop(z, dst, "inbound", zl.inbound))
		}
		res.Hops = append(res.Hops, api.TraceHop{Kind: api.HopApp, Pod: dst.Key(), Version: ans.app.Version, Status: ans.status})
	}
	d.Publish("traffic.traced", p.Key(), fmt.Sprintf("traced %s: %d", u.String(), ans.status),
		map[string]any{"url": u.String(), "requestId": id, "status": ans.status})
	return res, nil
}

// parseTraceTarget accepts "http://host[:port]/path" or "host:port".
func parseTraceTarget(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("target %q: want http://host[:port]/path or host:port", s)
		}
		s = "http://" + s + "/"
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("target %q: want http://host[:port]/path or host:port", s)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "meshlab-trace-" + hex.EncodeToString(b)
}

// snapshotPods reads every sidecar pod's nat counters and proxy stats, and every ambient
// pod's nat counters (istio-cni's in-pod rules), in parallel; what cannot be read stays
// empty (the trace then shows no delta for it).
func snapshotPods(ctx context.Context, d Deps, m *model.Model) map[string]podSnapshot {
	out := map[string]podSnapshot{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range m.Pods {
		if !p.Sidecar.Inject && !ambient(m, p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s podSnapshot
			if save, err := d.CaptureRules(p.Key()); err == nil {
				s.rules = parseCounters(save)
			}
			sctx, cancel := context.WithTimeout(ctx, traceTimeout)
			defer cancel()
			if p.Sidecar.Inject {
				s.stats, _ = proxyCounters(sctx, d, p.Key())
			}
			mu.Lock()
			out[p.Key()] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// sendTraced sends the one GET from the pod's namespace on a fresh connection.
func sendTraced(ctx context.Context, d Deps, p *model.Pod, target netip.AddrPort, rawURL, id string) (a traceAnswer) {
	var mu sync.Mutex // the transport dials on a goroutine of its own
	local := netip.AddrPort{}
	defer func() {
		mu.Lock()
		a.local = local
		mu.Unlock()
	}()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := d.DialFrom(ctx, p.Key(), target.String())
			if err == nil {
				if ap, perr := netip.ParseAddrPort(c.LocalAddr().String()); perr == nil {
					mu.Lock()
					local = ap
					mu.Unlock()
				}
			}
			return c, err
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: traceTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("User-Agent", "meshlab-trace")
	req.Header.Set("X-Request-Id", id)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		a.duration, a.err = time.Since(start), err
		return a
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, observe.BodyMax))
	a.duration, a.status, a.header, a.err = time.Since(start), resp.StatusCode, resp.Header, err
	_ = json.Unmarshal(body, &a.app) // another app's body leaves it empty
	return a
}

// destinationPod is the pod that answered: the demo app names itself; otherwise the
// sidecar pod whose inbound clusters counted a request.
func destinationPod(m *model.Model, a traceAnswer, before, after map[string]podSnapshot) *model.Pod {
	if a.app.Pod != "" {
		if p := m.Pod(model.PodKey(a.app.Namespace, a.app.Pod)); p != nil {
			return p
		}
	}
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for k := range statDeltas(before[n].stats, after[n].stats) {
			if strings.HasPrefix(k, "cluster.inbound|") && strings.HasSuffix(k, ".upstream_rq_total") {
				return m.Pod(n)
			}
		}
	}
	return nil
}

// inboundPort is the app port the destination's inbound cluster "inbound|<port>||"
// counted the request on (0 when unknown).
func inboundPort(dst *model.Pod, before, after map[string]podSnapshot) uint16 {
	if dst == nil {
		return 0
	}
	for k := range statDeltas(before[dst.Key()].stats, after[dst.Key()].stats) {
		rest, ok := strings.CutPrefix(k, "cluster.inbound|")
		if !ok || !strings.HasSuffix(k, ".upstream_rq_total") {
			continue
		}
		port, _, _ := strings.Cut(rest, "|")
		if n, err := strconv.ParseUint(port, 10, 16); err == nil {
			return uint16(n)
		}
	}
	return 0
}

// captureHop lists the pod's nat rules that counted packets during the request, on the
// request's side of the pod: the chains a connection the pod opens walks (outbound) or
// the chains a connection into the pod walks. The other side's counters also move with
// the pod's own chatter (its agent asking the proxy's admin port over loopback), which is
// not the request's path.
func captureHop(pod string, before, after podSnapshot, outbound bool) api.TraceHop {
	rules := slices.DeleteFunc(ruleDeltas(before.rules, after.rules), func(r api.TraceRule) bool {
		return outboundChain(r.Chain) != outbound
	})
	return api.TraceHop{Kind: api.HopCapture, Pod: pod, Rules: rules}
}

// outboundChain tells the nat chains a connection the pod opens walks (OUTPUT and the
// chains istio-iptables hangs from it) from those a connection into the pod walks.
func outboundChain(chain string) bool {
	switch chain {
	case "PREROUTING", "ISTIO_INBOUND", "ISTIO_IN_REDIRECT", "ISTIO_PRERT": // ISTIO_PRERT: istio-cni's in-pod chain
		return false
	}
	return true
}

// pooledNote explains a destination capture hop without rules: nat rules count only a
// connection's first packet, and a sidecar sends a request over a connection of its
// pool when one is open (as Envoy does), so a request that reached the pod on such a
// connection moved no counter.
func pooledNote(src, dst string) string {
	return "no capture rule counted this request: " + src + "'s sidecar sent it over a connection it already had open to " +
		dst + " (nat rules count only a connection's first packet: that connection walked PREROUTING -> ISTIO_INBOUND -> ISTIO_IN_REDIRECT when it was opened)"
}

// outboundHop explains the source sidecar's handling from its config_dump and stats.
func outboundHop(ctx context.Context, deps Deps, p *model.Pod, u *url.URL, target netip.AddrPort, dst *model.Pod, inPort uint16, xfcc string, a traceAnswer, before, after podSnapshot, al *accessLogEntry) api.TraceHop {
	h := api.TraceHop{Kind: api.HopProxy, Pod: p.Key(), Direction: "outbound"}
	deltas := statDeltas(before.stats, after.stats)
	h.Stats = deltas
	dctx, cancel := context.WithTimeout(ctx, traceTimeout)
	defer cancel()
	d, err := readProxyDump(dctx, deps, p.Key())
	if err != nil {
		h.Notes = "config_dump unavailable: " + err.Error()
	}
	var rcs []dumpRouteConfig
	if lis, ok := d.outboundListener(target.Addr().String(), target.Port()); ok {
		h.Listener = &api.TraceResource{Name: lis.Name, Origin: lis.Metadata.origin()}
		if lis.Name != "virtualOutbound" {
			h.Notes = "virtualOutbound (port 15001) handed the connection to " + lis.Name + " by its original destination " + target.String()
		}
		if len(lis.FilterChains) > 0 {
			fc := lis.FilterChains[0]
			h.FilterChain = &api.TraceResource{Name: fc.Name, Origin: fc.Metadata.origin()}
			if len(fc.Filters) > 0 {
				if rc, ok := d.routes[fc.Filters[len(fc.Filters)-1].TypedConfig.RDS.RouteConfigName]; ok {
					rcs = append(rcs, rc)
					vh, rt, ok := routeFor(rc, u.Host, u.Path)
					if vh.Name != "" {
						h.VirtualHost = &api.TraceResource{Name: vh.Name, Origin: vh.Metadata.origin()}
					}
					if ok {
						h.Route = &api.TraceResource{Name: rt.Name, Origin: rt.Metadata.origin()}
						if h.Route.Name == "" {
							h.Route.Name = rc.Name
						}
					}
				}
			}
		}
	}
	if c := usedCluster(deltas, "outbound"); c != "" {
		h.Cluster = &api.TraceResource{Name: c, Origin: d.clusters[c].Metadata.origin()}
	}
	if dst != nil && inPort != 0 {
		h.Endpoint = netip.AddrPortFrom(dst.IP, inPort).String()
	}
	if xfcc != "" {
		h.MTLS, h.PeerIdentity = true, xfccField(xfcc, "By")
	}
	if v, err := strconv.Atoi(a.header.Get("X-Envoy-Upstream-Service-Time")); err == nil {
		h.UpstreamServiceTimeMs = &v
	}
	applyAccessLog(&h, al, d, rcs, true)
	return h
}

// inboundHop explains the destination sidecar's handling.
func inboundHop(ctx context.Context, deps Deps, p *model.Pod, port uint16, xfcc string, before, after podSnapshot, al *accessLogEntry) api.TraceHop {
	h := api.TraceHop{Kind: api.HopProxy, Pod: p.Key(), Direction: "inbound"}
	deltas := statDeltas(before.stats, after.stats)
	h.Stats = deltas
	dctx, cancel := context.WithTimeout(ctx, traceTimeout)
	defer cancel()
	d, err := readProxyDump(dctx, deps, p.Key())
	if err != nil {
		h.Notes = "config_dump unavailable: " + err.Error()
	}
	if lis, ok := d.listener("virtualInbound"); ok {
		h.Listener = &api.TraceResource{Name: lis.Name, Origin: lis.Metadata.origin()}
	}
	transport := "raw_buffer"
	if xfcc != "" {
		transport = "tls"
		h.MTLS, h.PeerIdentity = true, xfccField(xfcc, "URI")
	}
	var rcs []dumpRouteConfig
	if fc, ok := d.inboundChain(port, transport); ok {
		h.FilterChain = &api.TraceResource{Name: fc.Name, Origin: fc.Metadata.origin()}
		for _, f := range fc.Filters {
			if f.TypedConfig.RouteConfig != nil {
				rcs = append(rcs, *f.TypedConfig.RouteConfig)
			}
		}
	}
	if c := usedCluster(deltas, "inbound"); c != "" {
		h.Cluster = &api.TraceResource{Name: c, Origin: d.clusters[c].Metadata.origin()}
	}
	for k := range deltas {
		switch {
		case strings.Contains(k, "shadow"):
		case strings.HasSuffix(k, "rbac.denied"):
			h.RBAC = "denied"
		case strings.HasSuffix(k, "rbac.allowed") && h.RBAC == "":
			h.RBAC = "allowed"
		}
	}
	if port != 0 {
		h.Endpoint = netip.AddrPortFrom(p.IP, port).String()
	}
	applyAccessLog(&h, al, d, rcs, false)
	return h
}

// usedCluster returns the cluster of the given direction ("outbound" or "inbound") whose
// upstream_rq_total rose, as the proxy counted the request.
func usedCluster(deltas map[string]int64, direction string) string {
	var names []string
	for k := range deltas {
		name, ok := strings.CutSuffix(strings.TrimPrefix(k, "cluster."), ".upstream_rq_total")
		if !ok || !strings.HasPrefix(k, "cluster.") {
			continue
		}
		if strings.HasPrefix(name, "inbound|") == (direction == "inbound") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// headerValue returns the header of the demo app's echo, whatever its case.
func headerValue(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// xfccField returns the key's value in the last element of an x-forwarded-client-cert
// header (the hop the destination sidecar added): "By" is the server's identity, "URI"
// the client's.
func xfccField(xfcc, key string) string {
	elems := strings.Split(xfcc, ",")
	for _, kv := range strings.Split(elems[len(elems)-1], ";") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
