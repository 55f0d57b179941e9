package observe

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// topologyInterval is how often sidecar stats are polled while someone watches.
const topologyInterval = time.Second

// pollParallel bounds how many agents are asked at once.
const pollParallel = 16

// edgeStatsFilter selects the outbound cluster stats edges are computed from, the
// inbound RBAC denials, and the HTTP listeners' downstream requests (a gateway's, whose
// listeners are outbound_<address>_<port>, for the traffic entering from the host).
const edgeStatsFilter = `^cluster\.outbound\|.*\.(upstream_rq_total|upstream_rq_5xx|upstream_rq_403|ssl\.handshake|tlsMode-[a-z]+\.total_match_count)$|rbac\.denied$|^http\.outbound_.*\.downstream_rq_(total|5xx)$`

// edgeStatSuffixes are the per-cluster stats an edge sums, checked in order.
var edgeStatSuffixes = []string{".upstream_rq_total", ".upstream_rq_5xx", ".upstream_rq_403", ".ssl.handshake",
	".tlsMode-istio.total_match_count", ".tlsMode-disabled.total_match_count"}

// edgeCounters are one edge's counters at one time.
type edgeCounters struct {
	requests, errors, denied, handshakes uint64
	mtlsMatches, rawMatches              uint64 // auto-mTLS socket matches: tlsMode-istio, tlsMode-disabled
	istio                                bool   // requests and errors are istio_requests_total's
	// ztunnel: the counters are an ambient pod's connections as ztunnel counted them
	// (topology_ztunnel.go); mtlsMatches and rawMatches count its HBONE and plaintext ones.
	ztunnel bool
}

// mtls reports whether the edge's connections are mutual TLS.
func (c edgeCounters) mtls() bool {
	return c.handshakes > 0 || c.mtlsMatches > 0 && c.rawMatches == 0
}

// podSample is what one poll learned from one pod's agent.
type podSample struct {
	status     *agentapi.Status
	edges      map[string]edgeCounters // by destination host
	rbacDenied uint64                  // inbound requests and connections denied by RBAC
	// gatewayRequests and gatewayErrors are a gateway pod's downstream requests and 5xx.
	gatewayRequests, gatewayErrors uint64
}

// Topology polls every sidecar once a second while at least one watcher is subscribed,
// and keeps the previous sample to turn counters into rates. The zero value is ready.
type Topology struct {
	mu      sync.Mutex
	subs    map[chan api.Topology]struct{}
	running bool
	wg      sync.WaitGroup

	prev    map[string]edgeCounters // by "pod|host"
	prevAt  time.Time
	epochs  map[string]map[int]string // pod -> epoch -> state, for epoch events
	serials map[string]string         // pod -> certificate serial, for cert events
}

// Watch is the lab's web.TopologySource: a sample a second on the channel until ctx ends.
// The poll runs while anyone watches and life (the lab's servers) lasts.
func (p *Topology) Watch(ctx, life context.Context, d Deps) <-chan api.Topology {
	ch := make(chan api.Topology, 1)
	p.mu.Lock()
	if p.subs == nil {
		p.subs = map[chan api.Topology]struct{}{}
	}
	p.subs[ch] = struct{}{}
	if !p.running {
		p.running = true
		p.wg.Add(1)
		go p.poll(life, d)
	}
	p.mu.Unlock()
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		delete(p.subs, ch)
		close(ch)
		p.mu.Unlock()
	}()
	return ch
}

// Wait returns when the poll has ended (no watcher left, or life ended).
func (p *Topology) Wait() { p.wg.Wait() }

// poll runs while anyone watches (and life lasts).
func (p *Topology) poll(life context.Context, d Deps) {
	defer p.wg.Done()
	tick := time.NewTicker(topologyInterval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(life, topologyInterval)
		t := p.Sample(ctx, d)
		cancel()
		p.mu.Lock()
		if len(p.subs) == 0 || life.Err() != nil {
			p.running = false
			p.mu.Unlock()
			return
		}
		for ch := range p.subs {
			select { // keep only the newest snapshot for a slow watcher
			case <-ch:
			default:
			}
			ch <- t
		}
		p.mu.Unlock()
		select {
		case <-tick.C:
		case <-life.Done():
		}
	}
}

// Sample asks every sidecar for its status and outbound stats and builds the topology
// (rates against the previous sample, when there is one); pods whose agent does not
// answer in time appear without edges. Epoch and certificate changes since the previous
// sample are published.
func (p *Topology) Sample(ctx context.Context, d Deps) api.Topology {
	m := d.Model()
	samples := make([]podSample, len(m.Pods))
	sem := make(chan struct{}, pollParallel)
	var wg sync.WaitGroup
	var zs ztunnelSample
	wg.Add(1)
	go func() {
		defer wg.Done()
		zs = sampleZtunnel(ctx, d, m) // topology_ztunnel.go: the ambient pods' edges
	}()
	for i, pod := range m.Pods {
		if !pod.Sidecar.Inject {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			samples[i] = samplePod(ctx, d, m, pod)
		}()
	}
	wg.Wait()
	for i, pod := range m.Pods {
		if e, ok := zs.edges[pod.Key()]; ok && !pod.Sidecar.Inject {
			samples[i].edges = e
		}
	}
	now := time.Now()
	t := buildTopology(m, samples)
	if zs.pod != nil {
		t.Pods = append(t.Pods, ztunnelTopologyPod(zs))
	}
	t.Time = now
	p.rates(&t, samples, m, now)
	p.publishEpochChanges(d, m, samples)
	p.publishCertChanges(d, m, samples)
	return t
}

// samplePod reads one pod's agent status, edge stats and fault aborts.
func samplePod(ctx context.Context, d Deps, m *model.Model, pod *model.Pod) podSample {
	var s podSample
	if st, err := d.AgentStatus(ctx, pod.Key()); err == nil {
		s.status = &st
	}
	stats, err := d.AgentStats(ctx, pod.Key(), edgeStatsFilter)
	if err != nil {
		return s
	}
	s.edges = edgesFromStats(stats)
	s.rbacDenied = rbacDenied(stats)
	if pod.Router {
		s.gatewayRequests, s.gatewayErrors = gatewayRequests(stats)
	}
	if istio, err := istioRequests(ctx, d, pod.Key()); err == nil { // topology_istio.go
		useIstioRequests(m, pod.Namespace, s.edges, istio)
	}
	return s
}

// edgesFromStats sums "cluster.outbound|<port>|<subset>|<host>.<stat>" counters by host.
func edgesFromStats(stats map[string]uint64) map[string]edgeCounters {
	out := map[string]edgeCounters{}
	for name, v := range stats {
		rest, ok := strings.CutPrefix(name, "cluster.outbound|")
		if !ok {
			continue
		}
		var stat string
		for _, suffix := range edgeStatSuffixes {
			if r, ok := strings.CutSuffix(rest, suffix); ok {
				rest, stat = r, suffix
				break
			}
		}
		parts := strings.Split(rest, "|") // port, subset, host
		if stat == "" || len(parts) != 3 || parts[2] == "" {
			continue
		}
		e := out[parts[2]]
		switch stat {
		case ".upstream_rq_total":
			e.requests += v
		case ".upstream_rq_5xx":
			e.errors += v
		case ".upstream_rq_403":
			e.denied += v
		case ".ssl.handshake":
			e.handshakes += v
		case ".tlsMode-istio.total_match_count":
			e.mtlsMatches += v
		case ".tlsMode-disabled.total_match_count":
			e.rawMatches += v
		}
		out[parts[2]] = e
	}
	return out
}

// rbacDenied sums the RBAC filters' denials (http.<prefix>.rbac.denied, tcp.rbac.denied):
// the requests and connections the sidecar refused by an AuthorizationPolicy.
func rbacDenied(stats map[string]uint64) uint64 {
	var n uint64
	for name, v := range stats {
		if strings.HasSuffix(name, "rbac.denied") && !strings.HasPrefix(name, "cluster.") {
			n += v
		}
	}
	return n
}

// buildTopology lays out the model's services and pods with the sampled status and
// edges (counters only; rates are added by the poller).
func buildTopology(m *model.Model, samples []podSample) api.Topology {
	t := api.Topology{Services: []api.TopologyService{}, Pods: []api.TopologyPod{}, Edges: []api.TopologyEdge{}}
	for _, s := range m.Services {
		ts := api.TopologyService{Name: s.Name, Namespace: s.Namespace, Hostname: s.Hostname(), VIP: s.VIP, Pods: []string{}}
		for _, p := range s.Ports {
			ts.Ports = append(ts.Ports, p.Port)
		}
		for _, p := range m.Pods {
			if p.Namespace == s.Namespace && s.Selects(p.Labels) {
				ts.Pods = append(ts.Pods, p.Key())
				ts.Gateway = ts.Gateway || p.Router
			}
		}
		t.Services = append(t.Services, ts)
	}
	for i, p := range m.Pods {
		tp := api.TopologyPod{Name: p.Name, Namespace: p.Namespace, Key: p.Key(), IP: p.IP, Sidecar: p.Sidecar.Inject, Ready: !p.Sidecar.Inject, Epoch: -1, Gateway: p.Router,
			DataplaneMode: model.DataplaneMode(m, p).String()}
		s := samples[i]
		tp.RBACDenied = s.rbacDenied
		if st := s.status; st != nil {
			tp.Ready = st.Ready
			for _, e := range st.Epochs {
				if e.State == agentapi.EpochLive && e.Epoch > tp.Epoch {
					tp.Epoch = e.Epoch
				}
			}
		}
		t.Pods = append(t.Pods, tp)
		for host, c := range s.edges {
			if c.requests == 0 {
				continue
			}
			e := api.TopologyEdge{From: p.Key(), To: host, Metric: c.metric(), Requests: c.requests, Errors: c.errors, MTLS: c.mtls(),
				Handshakes: c.handshakes, MTLSEndpoints: c.mtlsMatches, PlaintextEndpoints: c.rawMatches, Denied: c.denied}
			if c.ztunnel { // its matches are connections by security policy, not endpoints
				e.HBONE, e.MTLSEndpoints, e.PlaintextEndpoints = c.mtls(), 0, 0
			}
			t.Edges = append(t.Edges, e)
		}
	}
	for host, c := range hostEdges(m, samples) {
		t.Edges = append(t.Edges, api.TopologyEdge{From: api.HostNode, To: host, Metric: api.EdgeMetricGateway, Requests: c.requests, Errors: c.errors})
	}
	sortEdges(t.Edges)
	return t
}

func sortEdges(es []api.TopologyEdge) {
	for i := 1; i < len(es); i++ { // few edges per lab: insertion sort keeps it dependency-free
		for j := i; j > 0 && (es[j].From < es[j-1].From || es[j].From == es[j-1].From && es[j].To < es[j-1].To); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// rates fills each edge's RPS and ErrorRate from the previous sample, then keeps this
// one. A counter that went down (a proxy restarted without its stats) counts from zero.
func (p *Topology) rates(t *api.Topology, samples []podSample, m *model.Model, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := map[string]edgeCounters{}
	for i, pod := range m.Pods {
		for host, c := range samples[i].edges {
			cur[pod.Key()+"|"+host] = c
		}
	}
	for host, c := range hostEdges(m, samples) {
		cur[api.HostNode+"|"+host] = c
	}
	if dt := now.Sub(p.prevAt).Seconds(); p.prev != nil && dt > 0 {
		for i := range t.Edges {
			e := &t.Edges[i]
			c := cur[e.From+"|"+e.To]
			old := p.prev[e.From+"|"+e.To]
			if c.requests < old.requests {
				old = edgeCounters{}
			}
			dr, de := c.requests-old.requests, c.errors-min(old.errors, c.errors)
			e.RPS = float64(dr) / dt
			if dr > 0 {
				e.ErrorRate = min(float64(de)/float64(dr), 1)
			}
		}
	}
	p.prev, p.prevAt = cur, now
}

// publishEpochChanges publishes an event for every proxy epoch whose state changed
// since the previous sample (the first sample only records).
func (p *Topology) publishEpochChanges(d Deps, m *model.Model, samples []podSample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := p.epochs == nil
	if first {
		p.epochs = map[string]map[int]string{}
	}
	for i, pod := range m.Pods {
		st := samples[i].status
		if st == nil {
			continue
		}
		known := p.epochs[pod.Key()]
		if known == nil {
			known = map[int]string{}
			p.epochs[pod.Key()] = known
		}
		for _, e := range st.Epochs {
			if known[e.Epoch] == e.State {
				continue
			}
			known[e.Epoch] = e.State
			if !first {
				d.Publish(EventEpochChanged, pod.Key(), "proxy epoch "+strconv.Itoa(e.Epoch)+" is "+e.State,
					map[string]any{"epoch": e.Epoch, "state": e.State, "pid": e.PID})
			}
		}
	}
}

// publishCertChanges publishes cert.issued for a pod whose agent has its first
// certificate and cert.rotated for one whose serial changed since the previous sample
// (the first sample only records).
func (p *Topology) publishCertChanges(d Deps, m *model.Model, samples []podSample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := p.serials == nil
	if first {
		p.serials = map[string]string{}
	}
	for i, pod := range m.Pods {
		st := samples[i].status
		if st == nil || st.Cert == nil || st.Cert.Serial == "" {
			continue
		}
		c := st.Cert
		old, seen := p.serials[pod.Key()]
		if old == c.Serial {
			continue
		}
		p.serials[pod.Key()] = c.Serial
		if first {
			continue
		}
		fields := map[string]any{"serial": c.Serial, "notAfter": c.NotAfter, "rotations": c.Rotations, "spiffeID": c.SPIFFEID}
		if !seen || old == "" {
			d.Publish(EventCertIssued, pod.Key(), "certificate "+c.Serial+" issued for "+c.SPIFFEID, fields)
			continue
		}
		fields["previous"] = old
		d.Publish(EventCertRotated, pod.Key(), "certificate rotated: "+old+" -> "+c.Serial, fields)
	}
}
