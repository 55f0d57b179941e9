package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// traceVS routes every request for backend through a VirtualService (no subsets), so
// the route the trace names is generated from it.
const traceVS = `apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: backend
  namespace: default
spec:
  hosts: [backend]
  http:
  - name: all-to-backend
    route:
    - destination:
        host: backend
`

// TestTrace traces one mTLS request from frontend-v1 to backend in the hello lab, hop by
// hop, then again routed by a VirtualService, and checks bad input.
func TestTrace(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(lc.Close)

	res := trace(t, l.name, "frontend-v1", "http://backend:8080/")
	checkTrace(t, res)
	testutil.Golden(t, "trace-hello", []byte(stableTrace(res)))

	applyAndSync(t, l.name, lc, traceVS)
	res = trace(t, l.name, "frontend-v1", "backend:8080")
	checkTrace(t, res)
	out := hop(t, res, api.HopProxy, "outbound")
	wantOrigin := "/apis/networking.istio.io/v1/namespaces/default/virtual-service/backend"
	if out.Route == nil || out.Route.Origin != wantOrigin || out.Route.Name != "all-to-backend" {
		t.Errorf("route %+v; want all-to-backend from %s", out.Route, wantOrigin)
	}
	testutil.Golden(t, "trace-hello-vs", []byte(stableTrace(res)))

	text, err := meshlab(t, "trace", "--name", l.name, "frontend-v1", "http://backend:8080/")
	if err != nil || !strings.Contains(text, "(from "+wantOrigin+")") || !strings.Contains(text, "app answered 200") {
		t.Errorf("meshlab trace: %v\n%s", err, text)
	}

	for _, bad := range []struct{ name, pod, target, want string }{
		{"unknown pod", "nope", "backend:8080", "pods: backend-v1, backend-v2, frontend-v1"},
		{"unresolvable host", "frontend-v1", "http://nowhere:8080/", `"http://nowhere:8080/" does not resolve`},
		{"not a target", "frontend-v1", "backend", "want http://host[:port]/path or host:port"},
	} {
		out, err := meshlab(t, "trace", "--name", l.name, bad.pod, bad.target)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("%s: trace %s %s: %v\n%s\nwant an error containing %q", bad.name, bad.pod, bad.target, err, out, bad.want)
		}
	}
}

// trace runs `meshlab trace -o json`.
func trace(t *testing.T, name, pod, target string) api.TraceResult {
	t.Helper()
	out, err := meshlab(t, "trace", "--name", name, pod, target, "-o", "json")
	if err != nil {
		t.Fatalf("meshlab trace %s %s: %v\n%s", pod, target, err, out)
	}
	var res api.TraceResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decode trace: %v\n%s", err, out)
	}
	return res
}

// hop returns the trace's first hop of kind (and direction, for proxies).
func hop(t *testing.T, res api.TraceResult, kind, direction string) api.TraceHop {
	t.Helper()
	for _, h := range res.Hops {
		if h.Kind == kind && h.Direction == direction {
			return h
		}
	}
	t.Fatalf("trace has no %s %s hop: %+v", kind, direction, res.Hops)
	return api.TraceHop{}
}

// checkTrace asserts the path of a request from frontend-v1 to backend, hop by hop.
func checkTrace(t *testing.T, res api.TraceResult) {
	t.Helper()
	if res.Status != 200 || len(res.Hops) != 5 {
		t.Fatalf("trace: status %d, %d hops; want 200 and 5 hops: %+v", res.Status, len(res.Hops), res)
	}
	src := res.Hops[0]
	if src.Kind != api.HopCapture || src.Pod != "frontend-v1" || !hasRule(src.Rules, "ISTIO_OUTPUT", "ISTIO_REDIRECT") || !hasRule(src.Rules, "ISTIO_REDIRECT", "REDIRECT --to-ports 15001") {
		t.Errorf("source capture hop %+v; want frontend-v1's ISTIO_OUTPUT -> ISTIO_REDIRECT -> 15001 rules with positive deltas", src)
	}
	out := hop(t, res, api.HopProxy, "outbound")
	const cluster = "outbound|8080||backend.default.svc.cluster.local"
	if out.Pod != "frontend-v1" || out.Listener == nil || out.Listener.Name != "0.0.0.0_8080" || out.Cluster == nil || out.Cluster.Name != cluster {
		t.Errorf("outbound hop listener %+v cluster %+v; want 0.0.0.0_8080 and %s", out.Listener, out.Cluster, cluster)
	}
	if out.VirtualHost == nil || out.VirtualHost.Name != "backend.default.svc.cluster.local:8080" {
		t.Errorf("outbound virtual host %+v; want backend.default.svc.cluster.local:8080", out.VirtualHost)
	}
	if !out.MTLS || out.PeerIdentity != "spiffe://cluster.local/ns/default/sa/backend" {
		t.Errorf("outbound mTLS %v peer %q; want mTLS with spiffe://cluster.local/ns/default/sa/backend", out.MTLS, out.PeerIdentity)
	}
	app := res.Hops[4]
	if app.Kind != api.HopApp || !strings.HasPrefix(app.Pod, "backend-v") || app.Status != 200 {
		t.Errorf("app hop %+v; want a backend pod answering 200", app)
	}
	if out.Endpoint == "" || !strings.HasSuffix(out.Endpoint, ":8080") {
		t.Errorf("outbound endpoint %q; want %s's address on 8080", out.Endpoint, app.Pod)
	}
	// The destination's rules count a connection's first packet only: a request the
	// frontend's sidecar sends over a connection of its pool (a later trace, when the
	// VirtualService change left its clusters as they were) moves none, and the hop says so.
	dst := res.Hops[2]
	fresh := hasRule(dst.Rules, "PREROUTING", "ISTIO_INBOUND") && hasRule(dst.Rules, "ISTIO_IN_REDIRECT", "15006")
	pooled := len(dst.Rules) == 0 && strings.Contains(dst.Notes, "over a connection it already had open to "+app.Pod)
	if dst.Kind != api.HopCapture || dst.Pod != app.Pod || (!fresh && !pooled) {
		t.Errorf("destination capture hop %+v; want %s's PREROUTING -> ISTIO_INBOUND -> 15006 rules, or none and a note that the request came over an open connection", dst, app.Pod)
	}
	for _, r := range dst.Rules {
		if r.Chain == "OUTPUT" || r.Chain == "ISTIO_OUTPUT" {
			t.Errorf("destination capture hop lists %s's own outbound rule %q; want only the inbound side", dst.Pod, r.Rule)
		}
	}
	in := hop(t, res, api.HopProxy, "inbound")
	if in.Pod != app.Pod || in.Listener == nil || in.Listener.Name != "virtualInbound" || in.FilterChain == nil ||
		in.FilterChain.Name != "0.0.0.0_8080" || in.FilterChain.Origin != "/apis/v1/namespaces/default/services/backend" {
		t.Errorf("inbound hop %+v; want virtualInbound, chain 0.0.0.0_8080 from the backend service", in)
	}
	if !in.MTLS || in.PeerIdentity != "spiffe://cluster.local/ns/default/sa/frontend" || in.Cluster == nil || in.Cluster.Name != "inbound|8080||" {
		t.Errorf("inbound hop mTLS %v peer %q cluster %+v; want mTLS from frontend into inbound|8080||", in.MTLS, in.PeerIdentity, in.Cluster)
	}
	// Both proxies' access log lines for the request (found by its x-request-id) are the
	// hops' account of it.
	for _, h := range []api.TraceHop{out, in} {
		if !strings.Contains(h.AccessLog, `"`+res.RequestID+`"`) || !strings.Contains(h.AccessLog, `"GET / HTTP/1.1" 200 `) ||
			h.DurationMs == nil || h.ResponseFlags != "" || h.Route == nil || !strings.Contains(h.AccessLog, " "+h.Route.Name) {
			t.Errorf("%s hop: access log %q, duration %v, flags %q, route %+v; want the request's line, 200, a duration, no flags and the route it names",
				h.Direction, h.AccessLog, h.DurationMs, h.ResponseFlags, h.Route)
		}
	}
	if !strings.Contains(out.AccessLog, " "+cluster+" ") || !strings.Contains(out.AccessLog, `"`+out.Endpoint+`"`) {
		t.Errorf("outbound access log %q; want cluster %s and upstream host %s", out.AccessLog, cluster, out.Endpoint)
	}
}

// hasRule reports whether a rule of chain containing s counted packets.
func hasRule(rules []api.TraceRule, chain, s string) bool {
	for _, r := range rules {
		if r.Chain == chain && strings.Contains(r.Rule, s) && r.Packets > 0 {
			return true
		}
	}
	return false
}

var traceAddrRE = regexp.MustCompile(`\b\d+\.\d+\.\d+\.\d+:`)

// stableTrace renders the parts of a trace that do not vary between runs: the proxy hops'
// resources and origins, mTLS and peers, the capture rules of the ISTIO_* chains that
// take the request to the sidecars (other rules count unrelated packets), the answer.
// The backend pod that answered is masked (backend-vN), as are addresses.
func stableTrace(res api.TraceResult) string {
	var b strings.Builder
	mask := func(s string) string {
		return traceAddrRE.ReplaceAllString(strings.NewReplacer("backend-v1", "backend-vN", "backend-v2", "backend-vN").Replace(s), "IP:")
	}
	res2 := func(x *api.TraceResource) string {
		if x == nil {
			return "-"
		}
		return fmt.Sprintf("%s (origin %q)", x.Name, x.Origin)
	}
	fmt.Fprintf(&b, "GET %s from %s: %d\n", res.URL, res.Pod, res.Status)
	for _, h := range res.Hops {
		fmt.Fprintf(&b, "%s %s %s\n", h.Kind, mask(h.Pod), h.Direction)
		if h.Kind == api.HopCapture && len(h.Rules) == 0 && strings.Contains(h.Notes, "already had open") {
			// A pooled connection walked these when it was opened (checkTrace holds the
			// note); the golden is about the path, not about which trace opened it.
			b.WriteString("  rule PREROUTING: inbound TCP is considered for capture\n" +
				"  rule ISTIO_INBOUND: all other inbound TCP goes to the sidecar\n" +
				"  rule ISTIO_IN_REDIRECT: inbound TCP goes to the virtualInbound listener of the sidecar\n")
		}
		for _, r := range h.Rules {
			if strings.HasSuffix(r.Rule, "-j ISTIO_REDIRECT") || strings.HasSuffix(r.Rule, "-j ISTIO_IN_REDIRECT") ||
				r.Chain == "ISTIO_REDIRECT" || r.Chain == "ISTIO_IN_REDIRECT" || r.Chain == "PREROUTING" {
				fmt.Fprintf(&b, "  rule %s: %s\n", r.Chain, r.Comment)
			}
		}
		if h.Kind == api.HopProxy {
			fmt.Fprintf(&b, "  listener %s\n  chain %s\n  vhost %s\n  route %s\n  cluster %s\n  endpoint %s\n  mtls %v peer %s rbac %q\n",
				res2(h.Listener), res2(h.FilterChain), res2(h.VirtualHost), res2(h.Route), res2(h.Cluster), mask(h.Endpoint), h.MTLS, h.PeerIdentity, h.RBAC)
		}
		if h.Kind == api.HopApp {
			fmt.Fprintf(&b, "  status %d\n", h.Status)
		}
	}
	return b.String()
}
