package runner

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
)

// Result is the outcome of one check.
type Result struct {
	Check  string // the check's kind
	Passed bool
	Saw    string
	Want   string
	Hint   string // shown when the check fails
}

// stepState is what a step's actions leave for its checks.
type stepState struct {
	traffic  *api.TrafficResult            // the last traffic action's answers
	byPod    map[string]*api.TrafficResult // the last traffic from each pod
	load     *loadResult                   // the background load, once stopped
	loadStop func()                        // stops a running load
	load0    *TrafficAction                // the load the step's actions started, to restart it
	// signingRoot is the serial of the CA's signing root when the step began
	// ("" when the step has no root-rotated check).
	signingRoot string
	// pids are the live proxy pids, by pod, when the step began (for proxy-restarted).
	pids map[string]int
}

// evaluate runs one check against the lab's current state.
func (r *Runner) evaluate(ctx context.Context, l *Lab, c Check, st *stepState) Result {
	res := Result{Check: c.Kind}
	switch c.Kind {
	case "distribution":
		distribution(l, *c.Distribution, st, &res)
	case "status":
		status(*c.Status, st, &res)
	case "proxy-stale":
		proxyStale(r.Backend.ProxyStatus(), c.ProxyStale.Pod, &res)
	case "root-rotated":
		r.rootRotated(ctx, st, &res)
	case "proxy-restarted":
		r.proxyRestarted(ctx, c.ProxyRestarted.Pod, st, &res)
	case "latency":
		latency(*c.Latency, st, &res)
	case "proxy-synced":
		proxySynced(r.Backend.ProxyStatus(), *c.ProxySynced, &res)
	case "nack":
		nack(r.Backend.ProxyStatus(), *c.Nack, &res)
	case "stat":
		s := *c.Stat
		res.Want = fmt.Sprintf("%s %s %s %d", s.Pod, s.Name, s.Op, s.Value)
		res.Hint = "read them yourself: meshlab exec " + s.Pod + " -- curl -s localhost:15000/stats"
		stats, err := r.Backend.Stats(ctx, s.Pod)
		if err != nil {
			res.Saw = err.Error()
			return res
		}
		v, ok := stats[s.Name]
		if !ok {
			res.Saw = "no stat " + s.Name
			return res
		}
		res.Saw = fmt.Sprintf("%s = %d", s.Name, v)
		res.Passed = compare(v, s.Op, s.Value)
	case "header":
		header(*c.Header, st, &res)
	case "denied":
		pod := c.Denied.Pod
		res.Want = "requests denied by RBAC at " + pod + " (*.rbac.denied > 0)"
		res.Hint = "is an AuthorizationPolicy selecting " + pod + " applied?"
		stats, err := r.Backend.Stats(ctx, pod)
		if err != nil {
			res.Saw = err.Error()
			return res
		}
		var n uint64
		for k, v := range stats {
			if strings.HasSuffix(k, "rbac.denied") {
				n += v
			}
		}
		res.Saw = fmt.Sprintf("%d denied", n)
		res.Passed = n > 0
	case "epoch":
		epoch(ctx, r.Backend, *c.Epoch, &res)
	case "mtls":
		r.mtls(ctx, l, *c.MTLS, &res)
	case "hbone":
		r.hbone(ctx, l, *c.HBONE, &res)
	case "no-failures":
		res.Want = "the background load ran with 0 failed requests"
		res.Hint = "a request failed while the actions ran: look at the proxy's drain and restart settings"
		if st.load == nil {
			res.Saw = "no load action ran in this step"
			return res
		}
		res.Saw = fmt.Sprintf("%d requests, %d failed (%s)", st.load.sent, st.load.failed, counts(st.load.statuses))
		res.Passed = st.load.sent > 0 && st.load.failed == 0
	default:
		res.Saw = "check " + c.Kind + " is not implemented"
	}
	return res
}

// needTraffic returns the step's last traffic (from the pod from, when set).
func needTraffic(st *stepState, from string, res *Result) *api.TrafficResult {
	t := st.traffic
	if from != "" {
		t = st.byPod[from]
	}
	if t == nil {
		res.Saw = "no traffic was sent in this step"
		if from != "" {
			res.Saw = "no traffic was sent from " + from + " in this step"
		}
		res.Hint = "the step sends no traffic before this check: add a traffic action to its verify list"
	}
	return t
}

func distribution(l *Lab, d DistributionCheck, st *stepState, res *Result) {
	tol := Percent(15)
	if d.Tolerance != nil {
		tol = *d.Tolerance
	}
	by := cmpOr(d.By, "version")
	res.Want = shares(d.Want) + fmt.Sprintf(" ±%v by %s", tol, by)
	res.Hint = "compare the VirtualService weights and the DestinationRule subsets: meshlab get virtualservice -o yaml"
	t := needTraffic(st, "", res)
	if t == nil {
		return
	}
	byGroup := map[string]int{}
	total := 0
	for pod, n := range t.Pods {
		if pod == "" {
			continue
		}
		g := pod
		if by == "version" {
			g = l.versions[pod]
		}
		byGroup[g] += n
		total += n
	}
	if total == 0 {
		res.Saw = fmt.Sprintf("no answer named its pod (statuses %s)", counts(t.Statuses))
		return
	}
	got := map[string]float64{}
	for g, n := range byGroup {
		got[g] = 100 * float64(n) / float64(total)
	}
	res.Saw = shares(got) + fmt.Sprintf(" of %d answers", total)
	res.Passed = true
	for _, g := range slices.Sorted(maps.Keys(unionKeys(got, d.Want))) {
		if math.Abs(got[g]-d.Want[g]) > float64(tol) {
			res.Passed = false
		}
	}
}

func unionKeys(a, b map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func shares(m map[string]float64) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %s%%", cmpOr(k, "(no version)"), strconv.FormatFloat(m[k], 'f', 0, 64)))
	}
	return strings.Join(parts, ", ")
}

func status(s StatusCheck, st *stepState, res *Result) {
	var want []string
	if s.Min != nil {
		want = append(want, fmt.Sprintf("at least %d", *s.Min))
	}
	if s.Max != nil {
		want = append(want, fmt.Sprintf("at most %d", *s.Max))
	}
	if s.Fraction != nil {
		want = append(want, "at least "+s.Fraction.String())
	}
	res.Want = strings.Join(want, " and ") + " answers " + s.Code
	if s.From != "" {
		res.Want += " from " + s.From
	}
	res.Hint = "look at the proxies' access logs: meshlab logs POD -c proxy"
	t := needTraffic(st, s.From, res)
	if t == nil {
		return
	}
	n := t.Statuses[s.Code]
	res.Saw = fmt.Sprintf("%d of %d answers %s (all: %s)", n, t.Sent, s.Code, counts(t.Statuses))
	res.Passed = true
	if s.Min != nil && n < *s.Min {
		res.Passed = false
	}
	if s.Max != nil && n > *s.Max {
		res.Passed = false
	}
	if s.Fraction != nil && (t.Sent == 0 || 100*float64(n)/float64(t.Sent) < float64(*s.Fraction)-1e-9) {
		res.Passed = false
	}
}

func latency(c LatencyCheck, st *stepState, res *Result) {
	var want []string
	if c.Below > 0 {
		want = append(want, "below "+c.Below.D().String())
	}
	if c.Above > 0 {
		want = append(want, "above "+c.Above.D().String())
	}
	res.Want = fmt.Sprintf("p%d %s", c.Percentile, strings.Join(want, " and "))
	res.Hint = "latency comes from the app (latency:), fault delays and timeouts in the VirtualService"
	t := needTraffic(st, "", res)
	if t == nil {
		return
	}
	ms := map[int]float64{50: t.P50Ms, 90: t.P90Ms, 99: t.P99Ms, 100: t.MaxMs}[c.Percentile]
	got := time.Duration(ms * float64(time.Millisecond))
	res.Saw = fmt.Sprintf("p%d %v", c.Percentile, got.Round(100*time.Microsecond))
	res.Passed = (c.Below == 0 || got < c.Below.D()) && (c.Above == 0 || got > c.Above.D())
}

func findProxy(all []api.ProxyStatus, pod string) (api.ProxyStatus, bool) {
	for _, p := range all {
		if p.Pod == pod {
			return p, true
		}
	}
	return api.ProxyStatus{}, false
}

func proxySynced(all []api.ProxyStatus, c ProxySyncedCheck, res *Result) {
	res.Want = c.Pod + " SYNCED for " + cmpOr(c.Type, "every type")
	res.Hint = "see meshlab proxy-status; a NACK names the field the proxy refused"
	ps, ok := findProxy(all, c.Pod)
	if !ok || !ps.Connected {
		res.Saw = c.Pod + " is not connected to the control plane"
		return
	}
	var saw []string
	res.Passed = true
	for _, t := range slices.Sorted(maps.Keys(ps.Types)) {
		if c.Type != "" && t != c.Type {
			continue
		}
		s := ps.Types[t].State()
		saw = append(saw, t+" "+s)
		if s != "SYNCED" {
			res.Passed = false
		}
	}
	if len(saw) == 0 {
		saw, res.Passed = []string{"nothing sent"}, false
	}
	res.Saw = strings.Join(saw, ", ")
}

func nack(all []api.ProxyStatus, c NackCheck, res *Result) {
	res.Want = fmt.Sprintf("a NACK from %s containing %q", c.Pod, c.Message)
	res.Hint = "a proxy NACKs a resource it cannot apply: see meshlab proxy-status"
	ps, _ := findProxy(all, c.Pod)
	var saw []string
	for _, t := range slices.Sorted(maps.Keys(ps.Types)) {
		ts := ps.Types[t]
		if (c.Type != "" && t != c.Type) || ts.NackError == "" {
			continue
		}
		saw = append(saw, t+": "+ts.NackError)
		if strings.Contains(ts.NackError, c.Message) {
			res.Passed = true
		}
	}
	if len(saw) == 0 {
		saw = []string{"no NACK"}
	}
	res.Saw = strings.Join(saw, "; ")
}

func proxyStale(all []api.ProxyStatus, pod string, res *Result) {
	res.Want = pod + " cut off from the control plane's current config (disconnected, or STALE)"
	res.Hint = "stop the discovery server first (meshlab fault add discovery-stop --duration D), then change the config"
	ps, ok := findProxy(all, pod)
	if !ok || !ps.Connected {
		res.Saw = pod + " is not connected to the control plane"
		res.Passed = true
		return
	}
	var saw []string
	for _, t := range slices.Sorted(maps.Keys(ps.Types)) {
		s := ps.Types[t].State()
		saw = append(saw, t+" "+s)
		if s == "STALE" {
			res.Passed = true
		}
	}
	res.Saw = pod + " connected: " + cmpOr(strings.Join(saw, ", "), "nothing sent")
}

// signingRoot returns the serial of the lab CA's signing root.
func signingRoot(ctx context.Context, b Backend) (string, error) {
	s, err := b.CAStatus(ctx)
	if err != nil {
		return "", err
	}
	return s.Signing.Serial, nil
}

func (r *Runner) rootRotated(ctx context.Context, st *stepState, res *Result) {
	res.Want = "a new signing root (not " + cmpOr(st.signingRoot, "unknown") + "), rotation finished, every pod's certificate issued by it"
	res.Hint = "rotate the root: meshlab ca rotate-root; see meshlab ca status"
	s, err := r.Backend.CAStatus(ctx)
	if err != nil {
		res.Saw = err.Error()
		return
	}
	var behind []string
	for _, p := range s.Pods {
		if p.IssuingRoot != s.Signing.Serial {
			behind = append(behind, p.Pod)
		}
	}
	res.Saw = fmt.Sprintf("signing root %s, phase %s", s.Signing.Serial, s.Phase)
	if len(behind) > 0 {
		res.Saw += "; not yet issued by it: " + strings.Join(behind, ", ")
	}
	res.Passed = st.signingRoot != "" && s.Signing.Serial != st.signingRoot && s.Phase == "stable" && len(behind) == 0
}

func (r *Runner) proxyRestarted(ctx context.Context, pod string, st *stepState, res *Result) {
	before := st.pids[pod]
	res.Want = fmt.Sprintf("%s's live proxy a new process (not pid %d, which was live when the step began)", pod, before)
	res.Hint = "restart it (meshlab proxy restart " + pod + ") or kill it (meshlab fault add kill-proxy " + pod + ") and let its agent start a new one"
	pid, err := livePID(ctx, r.Backend, pod)
	if err != nil {
		res.Saw = err.Error()
		return
	}
	res.Saw = fmt.Sprintf("live proxy pid %d", pid)
	res.Passed = before != 0 && pid != before
}

func epoch(ctx context.Context, b Backend, c EpochCheck, res *Result) {
	res.Want = fmt.Sprintf("%s live in epoch %d or later", c.Pod, c.AtLeast)
	res.Hint = "restart the proxy: meshlab proxy restart " + c.Pod
	d, err := b.PodDetail(ctx, c.Pod)
	if err != nil {
		res.Saw = err.Error()
		return
	}
	live := -1
	if d.Proxy != nil {
		for _, e := range d.Proxy.Epochs {
			if e.State == "live" && e.Epoch > live {
				live = e.Epoch
			}
		}
	}
	if live < 0 {
		res.Saw = "no live epoch"
		return
	}
	res.Saw = fmt.Sprintf("live epoch %d", live)
	res.Passed = live >= c.AtLeast
}

func compare(v uint64, op string, want uint64) bool {
	switch op {
	case ">":
		return v > want
	case ">=":
		return v >= want
	case "==":
		return v == want
	case "<":
		return v < want
	case "<=":
		return v <= want
	case "!=":
		return v != want
	}
	return false
}

// counts renders status counts as "200 x18, 503 x2", sorted by status.
func counts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// inboundTLSStat counts the TLS handshakes a sidecar's inbound listener accepted.
const inboundTLSStat = "listener.0.0.0.0_15006.ssl.handshake"

func (r *Runner) mtls(ctx context.Context, l *Lab, c MTLSCheck, res *Result) {
	res.Want = fmt.Sprintf("%s -> %s over mTLS", c.From, c.To)
	if c.Identity != "" {
		res.Want += " with peer identity " + c.Identity
	}
	res.Hint = "see PeerAuthentication and DestinationRule tls modes; a pod without a sidecar speaks plain text"
	from, err := r.Backend.Stats(ctx, c.From)
	if err != nil {
		res.Saw = err.Error()
		return
	}
	var out uint64
	for name, v := range from {
		if !strings.HasPrefix(name, "cluster.outbound|") || !strings.HasSuffix(name, ".ssl.handshake") {
			continue
		}
		for _, h := range l.hosts[c.To] {
			if strings.HasSuffix(strings.TrimSuffix(name, ".ssl.handshake"), "|"+h) {
				out += v
			}
		}
	}
	to, err := r.Backend.Stats(ctx, c.To)
	if err != nil {
		res.Saw = err.Error()
		return
	}
	in := to[inboundTLSStat]
	id := "(unknown)"
	if d, err := r.Backend.PodDetail(ctx, c.To); err == nil && d.Proxy != nil && d.Proxy.Cert != nil {
		id = d.Proxy.Cert.SPIFFEID
	}
	res.Saw = fmt.Sprintf("%s made %d TLS handshakes to %s; %s accepted %d; its certificate is %s",
		c.From, out, strings.Join(l.hosts[c.To], ", "), c.To, in, id)
	res.Passed = out > 0 && in > 0 && (c.Identity == "" || id == c.Identity)
}
