package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// BenchmarkPilotLoad is meshlab's pilot-load: it connects simulated proxies (ADS clients
// over real gRPC on the server's unix socket, which behave as Envoy: CDS and LDS
// wildcard, then EDS and RDS by the names those name, ACKing every response and decoding
// only what changed) to a discovery server, then times the common changes from the
// Update call to every proxy having ACKed, of every type, the version the type last
// changed in (a change pushes only the types it touches: sotwcache.go). The proxies run
// in a child process (TestPilotLoadClients; MESHLAB_LOAD_INPROC=1 keeps them in), so
// the CPU, heap and RSS reported are the server's. Sizes: 100 proxies (50 services x 2,
// the 100-pod lab) and 1000 proxies (100 services x 10);
// MESHLAB_LOAD_PROXIES=1000 runs one size only. Metrics per change: p50/p99 of
// push-to-all-ACKed and of the Update call itself, the server's CPU per change and the
// proxies', the server's heap in use after the change and its peak RSS so far.
// MESHLAB_LOAD_HEAPPROFILE=path writes the live heap after each change to path.<change>-<n>,
// MESHLAB_LOAD_CPUPROFILE=path the server's CPU profile of each change's runs to
// path.<change>-<n>; MESHLAB_LOAD_CLIENTS_CPUPROFILE=path the simulated proxies' CPU
// profile of the whole run.
//
//	go test -run '^$' -bench PilotLoad -benchtime 20x ./controlplane/discovery
func BenchmarkPilotLoad(b *testing.B) {
	sizes := [][2]int{{50, 2}, {100, 10}}
	if v := os.Getenv("MESHLAB_LOAD_PROXIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			b.Fatalf("MESHLAB_LOAD_PROXIES=%q: want a number >= 2", v)
		}
		sizes = [][2]int{{max(n/10, 1), 10}}
		if n <= 100 {
			sizes = [][2]int{{n / 2, 2}}
		}
	}
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("proxies=%d", sz[0]*sz[1]), func(b *testing.B) { pilotLoad(b, sz[0], sz[1]) })
	}
}

func pilotLoad(b *testing.B, services, replicas int) {
	b.Helper()
	base := scaleModel(services, replicas)
	acks := newAckWaiter()
	s, stop := startLoadServer(b, acks.observe)
	defer stop()
	ctx := context.Background()
	if err := s.UpdateFor(ctx, base, "start"); err != nil {
		b.Fatalf("initial update: %v", err)
	}
	proxies := 0
	for _, p := range base.Pods {
		if p.Sidecar.Inject {
			proxies++
		}
	}
	start := time.Now()
	clients := startSimProxies(b, s.path, services, replicas)
	defer clients.close(b)
	acks.wait(b, s)
	b.Logf("%d proxies connected and synced in %v", proxies, time.Since(start).Round(time.Millisecond))

	svc0, svc1 := base.Services[0], base.Services[1]
	changes := []struct {
		name string
		make func() *model.Model
	}{
		{"VirtualService", func() *model.Model {
			m := scaleModel(services, replicas)
			m.Istio.VirtualServices = []*model.IstioConfig[*networking.VirtualService]{{
				Name: svc0.Name, Namespace: svc0.Namespace,
				Spec: &networking.VirtualService{Hosts: []string{svc0.Name}, Http: []*networking.HTTPRoute{{
					Timeout: durationpb.New(3 * time.Second),
					Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: svc0.Name}}},
				}}},
			}}
			return m
		}},
		{"DestinationRule", func() *model.Model {
			m := scaleModel(services, replicas)
			m.Istio.DestinationRules = []*model.IstioConfig[*networking.DestinationRule]{{
				Name: svc1.Name, Namespace: svc1.Namespace,
				Spec: &networking.DestinationRule{Host: svc1.Name, TrafficPolicy: &networking.TrafficPolicy{
					LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{
						Simple: networking.LoadBalancerSettings_ROUND_ROBIN,
					}},
				}},
			}}
			return m
		}},
		{"Endpoint", func() *model.Model {
			// A pod without a sidecar joins svc-000: an endpoint, no new proxy.
			m := scaleModel(services, replicas)
			p := scalePod(0, replicas, false)
			return model.New(m.Services, append(slices.Clone(m.Pods), p))
		}},
		{"NewService", func() *model.Model {
			m := scaleModel(services, replicas)
			return model.New(append(slices.Clone(m.Services), scaleService(services)), m.Pods)
		}},
	}
	for _, c := range changes {
		changed := c.make()
		b.Run(c.name, func(b *testing.B) {
			var push, update []time.Duration
			cpu0, ccpu0 := processCPU(), clients.cpu()
			if path := os.Getenv("MESHLAB_LOAD_CPUPROFILE"); path != "" {
				stop := startCPUProfile(b, fmt.Sprintf("%s.%s-%d", path, c.name, proxies))
				defer stop()
			}
			b.ResetTimer()
			for i := range b.N {
				m := changed
				if i%2 == 1 {
					m = base
				}
				t0 := time.Now()
				if err := s.UpdateFor(ctx, m, "bench: "+c.name); err != nil {
					b.Fatalf("update: %v", err)
				}
				update = append(update, time.Since(t0))
				acks.wait(b, s)
				push = append(push, time.Since(t0))
			}
			b.StopTimer()
			cpu, ccpu := processCPU()-cpu0, clients.cpu()-ccpu0
			if b.N%2 == 1 { // back to base for the next change
				if err := s.UpdateFor(ctx, base, "bench: reset"); err != nil {
					b.Fatalf("update: %v", err)
				}
				acks.wait(b, s)
			}
			if err := clients.err(); err != nil {
				b.Fatalf("simulated proxies failed: %v", err)
			}
			b.ReportMetric(ms(percentile(push, 50)), "push-p50-ms")
			b.ReportMetric(ms(percentile(push, 99)), "push-p99-ms")
			b.ReportMetric(ms(percentile(update, 50)), "update-p50-ms")
			b.ReportMetric(ms(percentile(update, 99)), "update-p99-ms")
			b.ReportMetric(ms(cpu)/float64(b.N), "cpu-ms/change")
			b.ReportMetric(ms(ccpu)/float64(b.N), "proxies-cpu-ms/change")
			if path := os.Getenv("MESHLAB_LOAD_HEAPPROFILE"); path != "" {
				writeHeapProfile(b, fmt.Sprintf("%s.%s-%d", path, c.name, proxies))
			}
			runtime.GC()
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			b.ReportMetric(float64(mem.HeapInuse)/(1<<20), "heap-MB")
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MB")
		})
	}
}

// scaleModel is services Services ("svc-000", ...) of one HTTP port in namespace
// default, each selecting replicas pods with a sidecar.
func scaleModel(services, replicas int) *model.Model {
	var svcs []*model.Service
	var pods []*model.Pod
	for i := range services {
		svcs = append(svcs, scaleService(i))
		for r := range replicas {
			pods = append(pods, scalePod(i, r, true))
		}
	}
	return model.New(svcs, pods)
}

func scaleService(i int) *model.Service {
	name := fmt.Sprintf("svc-%03d", i)
	return &model.Service{
		Name: name, Namespace: "default", VIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
		Ports:    []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080, Protocol: model.ProtocolHTTP}},
		Selector: map[string]string{"app": name},
	}
}

func scalePod(svc, r int, sidecar bool) *model.Pod {
	app := fmt.Sprintf("svc-%03d", svc)
	n := svc*16 + r
	return &model.Pod{
		Name: fmt.Sprintf("%s-%d", app, r), Namespace: "default", Workload: app,
		Labels: map[string]string{"app": app}, ServiceAccount: app,
		IP:    netip.AddrFrom4([4]byte{10, 244, byte(n >> 8), byte(n)}),
		Ports: []uint16{8080}, Sidecar: model.SidecarSpec{Inject: sidecar},
	}
}

// startLoadServer runs a quiet server on a socket in a temporary directory.
func startLoadServer(b *testing.B, onEvent func(Event)) (*Server, func()) {
	b.Helper()
	s, err := New(Options{
		Logger: slog.New(slog.DiscardHandler), SocketPath: filepath.Join(b.TempDir(), "xds.sock"), SocketGID: -1,
		OnEvent: onEvent,
	})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}
}

// ackWaiter follows the server's ACK events, so that the benchmark waits for every
// proxy to ACK its version without polling Status (which would load the server).
type ackWaiter struct {
	mu      sync.Mutex
	acked   map[string]map[string]string // node id -> type URL -> version ACKed
	target  map[string]map[string]string // node id -> type URL -> version to reach (the type's last change)
	pending int                          // (node, type) pairs not at their target
	done    chan struct{}
}

// loadTypes are the types every simulated proxy receives.
var loadTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

func newAckWaiter() *ackWaiter { return &ackWaiter{acked: map[string]map[string]string{}} }

// observe is the server's OnEvent: it must not block.
func (w *ackWaiter) observe(e Event) {
	if e.Kind != EventACK {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.acked[e.NodeID]
	if n == nil {
		n = map[string]string{}
		w.acked[e.NodeID] = n
	}
	was := n[e.TypeURL]
	n[e.TypeURL] = e.Version
	if w.target == nil || was == e.Version {
		return
	}
	want := w.target[e.NodeID][e.TypeURL]
	switch {
	case e.Version == want:
		w.pending--
	case was == want:
		w.pending++
	}
	if w.pending == 0 && w.done != nil {
		close(w.done)
		w.done = nil
	}
}

// wait returns once every proxy holding a snapshot has ACKed, of every type, the
// version in which the type last changed (what it is pushed: sotwcache.go).
func (w *ackWaiter) wait(b *testing.B, s *Server) {
	b.Helper()
	s.mu.Lock()
	target := make(map[string]map[string]string, len(s.proxies))
	for id, st := range s.proxies {
		target[id] = map[string]string{}
		for _, typ := range loadTypes {
			target[id][typ] = st.types[typ].since
		}
	}
	s.mu.Unlock()
	w.mu.Lock()
	w.target, w.pending = target, 0
	for id, vs := range target {
		for typ, v := range vs {
			if w.acked[id][typ] != v {
				w.pending++
			}
		}
	}
	done := make(chan struct{})
	if w.pending == 0 {
		close(done)
	} else {
		w.done = done
	}
	w.mu.Unlock()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		w.mu.Lock()
		defer w.mu.Unlock()
		b.Fatalf("%d (proxy, type) pairs not ACKed at their version after 2m", w.pending)
	}
}

// simClients are the simulated proxies of a benchmark: in a child process (the test
// binary running TestPilotLoadClients), so that the figures of this process are the
// server's alone, as pilot-load runs apart from istiod; MESHLAB_LOAD_INPROC=1 runs them
// in this process instead.
type simClients struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	out    *bytes.Buffer
	inproc *simProxies
}

func startSimProxies(b *testing.B, path string, services, replicas int) *simClients {
	b.Helper()
	if os.Getenv("MESHLAB_LOAD_INPROC") != "" {
		return &simClients{inproc: connectSimProxies(b, path, scaleModel(services, replicas))}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPilotLoadClients$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "MESHLAB_LOAD_SOCKET="+path,
		fmt.Sprintf("MESHLAB_LOAD_SHAPE=%d,%d", services, replicas))
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start simulated proxies: %v", err)
	}
	return &simClients{cmd: cmd, stdin: stdin, out: out}
}

// cpu is the CPU time the simulated proxies used so far.
func (c *simClients) cpu() time.Duration {
	if c.inproc != nil {
		return 0 // counted in this process's
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100
}

// err reports whether the child ended early.
func (c *simClients) err() error {
	if c.inproc != nil {
		if e := c.inproc.errors(); e != "" {
			return errors.New(e)
		}
		return nil
	}
	if c.cmd.ProcessState != nil {
		return fmt.Errorf("simulated proxies exited: %s", c.out)
	}
	return nil
}

func (c *simClients) close(b *testing.B) {
	b.Helper()
	if c.inproc != nil {
		c.inproc.close()
		return
	}
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		b.Errorf("simulated proxies: %v\n%s", err, c.out)
	}
}

// TestPilotLoadClients is BenchmarkPilotLoad's child process: it runs only when the
// benchmark starts it, connects one simulated proxy per pod of the benchmark's model,
// and runs until its stdin closes.
func TestPilotLoadClients(t *testing.T) {
	path := os.Getenv("MESHLAB_LOAD_SOCKET")
	if path == "" {
		t.Skip("run by BenchmarkPilotLoad")
	}
	var services, replicas int
	if _, err := fmt.Sscanf(os.Getenv("MESHLAB_LOAD_SHAPE"), "%d,%d", &services, &replicas); err != nil {
		t.Fatalf("MESHLAB_LOAD_SHAPE: %v", err)
	}
	if path := os.Getenv("MESHLAB_LOAD_CLIENTS_CPUPROFILE"); path != "" { // the whole run, set-up included
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	sp := connectSimProxies(t, path, scaleModel(services, replicas))
	_, _ = io.Copy(io.Discard, os.Stdin)
	sp.close()
	if e := sp.errors(); e != "" {
		t.Fatal(e)
	}
}

// simProxies is a set of simulated proxies.
type simProxies struct {
	proxies []*simProxy
	conns   []*grpc.ClientConn
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// connectSimProxies connects one simulated proxy per injected pod of m, sharing a few
// gRPC connections (Envoy opens one per proxy; the server's per-stream work is the same).
func connectSimProxies(tb testing.TB, path string, m *model.Model) *simProxies {
	tb.Helper()
	// The clients decode with the server's codec: gRPC's default one materialises every
	// 32 KiB-1 MiB response into a zeroed 1 MiB buffer (codec.go), which cost the
	// simulated proxies (on the server's cores) more than decoding the response did.
	codec, err := newPushCodec()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sp := &simProxies{cancel: cancel}
	for range 8 {
		conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec)))
		if err != nil {
			tb.Fatalf("dial %s: %v", path, err)
		}
		sp.conns = append(sp.conns, conn)
	}
	for i, pod := range m.Pods {
		if !pod.Sidecar.Inject {
			continue
		}
		stream, err := discoverypb.NewAggregatedDiscoveryServiceClient(sp.conns[i%len(sp.conns)]).StreamAggregatedResources(ctx)
		if err != nil {
			tb.Fatalf("open ADS stream: %v", err)
		}
		p := &simProxy{node: &core.Node{Id: pod.NodeID(), Cluster: pod.ServiceCluster()}, stream: stream,
			seen: map[string]map[string]simResource{}, last: map[string]*discoverypb.DiscoveryResponse{}}
		sp.proxies = append(sp.proxies, p)
		sp.wg.Go(p.run)
	}
	return sp
}

func (sp *simProxies) close() {
	sp.cancel()
	sp.wg.Wait()
	for _, c := range sp.conns {
		c.Close()
	}
}

// errors returns the failures of proxies whose stream ended, or "".
func (sp *simProxies) errors() string {
	var out []string
	for _, p := range sp.proxies {
		p.mu.Lock()
		if p.err != nil {
			out = append(out, p.node.Id+": "+p.err.Error())
		}
		p.mu.Unlock()
	}
	return strings.Join(out, "; ")
}

// simProxy is one simulated Envoy on one ADS stream. Like Envoy it decodes only the
// resources whose bytes changed since the last response.
type simProxy struct {
	node   *core.Node
	stream discoverypb.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	// seen holds, by type and resource name, the last bytes and what they named.
	seen map[string]map[string]simResource
	// last is the last response of each type, whose version and nonce requests carry.
	last map[string]*discoverypb.DiscoveryResponse
	// eds and rds are the names subscribed to.
	eds, rds []string

	mu  sync.Mutex
	err error
}

type simResource struct {
	raw   []byte
	names []string // the EDS cluster or RDS route names the resource makes the proxy ask for
}

func (p *simProxy) run() {
	err := p.loop()
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

func (p *simProxy) loop() error {
	if err := p.stream.Send(&discoverypb.DiscoveryRequest{Node: p.node, TypeUrl: resource.ClusterType}); err != nil {
		return nil // the benchmark ended
	}
	if err := p.stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType}); err != nil {
		return nil
	}
	for {
		resp, err := p.stream.Recv()
		if err != nil {
			if p.stream.Context().Err() != nil {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		if err := p.handle(resp); err != nil {
			return err
		}
	}
}

// handle applies one response: it ACKs it, and after CDS or LDS subscribes EDS or RDS to
// the names it now needs, as Envoy does.
func (p *simProxy) handle(resp *discoverypb.DiscoveryResponse) error {
	typ := resp.GetTypeUrl()
	p.last[typ] = resp
	var names []string
	if typ == resource.ClusterType || typ == resource.ListenerType {
		old := p.seen[typ]
		cur := make(map[string]simResource, len(resp.GetResources()))
		for _, a := range resp.GetResources() {
			name := fieldOneString(a.GetValue())
			if r, ok := old[name]; ok && bytes.Equal(r.raw, a.GetValue()) {
				cur[name] = r
				names = append(names, r.names...)
				continue
			}
			r, err := decodeSim(typ, a.GetValue())
			if err != nil {
				return fmt.Errorf("decode %s %s: %w", typ, name, err)
			}
			cur[name] = r
			names = append(names, r.names...)
		}
		p.seen[typ] = cur
		slices.Sort(names)
		names = slices.Compact(names)
	}
	if err := p.stream.Send(&discoverypb.DiscoveryRequest{
		TypeUrl: typ, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(), ResourceNames: p.subscribed(typ),
	}); err != nil {
		return nil
	}
	sub, want := "", &p.eds
	switch typ {
	case resource.ClusterType:
		sub = resource.EndpointType
	case resource.ListenerType:
		sub, want = resource.RouteType, &p.rds
	default:
		return nil
	}
	if slices.Equal(*want, names) {
		return nil
	}
	*want = names
	req := &discoverypb.DiscoveryRequest{TypeUrl: sub, ResourceNames: names}
	if last := p.last[sub]; last != nil {
		req.VersionInfo, req.ResponseNonce = last.GetVersionInfo(), last.GetNonce()
	}
	_ = p.stream.Send(req)
	return nil
}

func (p *simProxy) subscribed(typ string) []string {
	switch typ {
	case resource.EndpointType:
		return p.eds
	case resource.RouteType:
		return p.rds
	}
	return nil
}

// decodeSim decodes a cluster (the EDS name it needs) or a listener (the RDS names of its
// HTTP connection managers).
func decodeSim(typ string, raw []byte) (simResource, error) {
	r := simResource{raw: raw}
	switch typ {
	case resource.ClusterType:
		c := &cluster.Cluster{}
		if err := proto.Unmarshal(raw, c); err != nil {
			return r, err
		}
		if c.GetType() == cluster.Cluster_EDS {
			name := c.GetName()
			if sn := c.GetEdsClusterConfig().GetServiceName(); sn != "" {
				name = sn
			}
			r.names = []string{name}
		}
	case resource.ListenerType:
		l := &listener.Listener{}
		if err := proto.Unmarshal(raw, l); err != nil {
			return r, err
		}
		chains := append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain())
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				if f.GetTypedConfig().MessageIs(&hcm.HttpConnectionManager{}) {
					h := &hcm.HttpConnectionManager{}
					if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
						return r, err
					}
					if n := h.GetRds().GetRouteConfigName(); n != "" {
						r.names = append(r.names, n)
					}
				}
			}
		}
	}
	return r, nil
}

// fieldOneString reads field 1 (the name of a Cluster or Listener) of an encoded message.
func fieldOneString(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return ""
			}
			return string(v)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return ""
		}
		b = b[n:]
	}
	return ""
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// processCPU is the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's VmHWM in bytes (0 if unknown).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// startCPUProfile profiles this process's CPU (the server's) into path until the
// returned function is called.
func startCPUProfile(b *testing.B, path string) func() {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("cpu profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("cpu profile %s: %v", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// writeHeapProfile writes the live heap (servers and simulated proxies alike) to path, for
// `go tool pprof -sample_index=inuse_space`.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatalf("write heap profile %s: %v", path, err)
	}
}
