// Package proxy is meshlab's built-in data plane (`meshlab proxy`), a stand-in for the
// sidecar subset of Envoy: Envoy's command line, bootstrap, state-of-the-world ADS with
// ACK/NACK, listeners with original-destination handoff, tcp_proxy and the HTTP
// connection manager with the router, and the admin API, with Envoy's stat names.
//
// Like Envoy it knows only its command line, its bootstrap and what arrives over xDS; it
// imports nothing from the control plane. Sub-packages each do one job: bootstrap,
// xdsclient, listener, httpconn, tcpproxy, cluster, admin, stats, envoylog, fieldcheck.
package proxy

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/admin"
	"github.com/meshlab/meshlab/dataplane/proxy/bootstrap"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/envoylog"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/hotrestart"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/listener"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
	"github.com/meshlab/meshlab/dataplane/rqtotals"
)

// Version is the proxy's version string, shaped like Envoy's
// "<sha>/<version>/<status>/<build type>/<ssl>".
const Version = "meshlab/1.0.0-dev/Clean/RELEASE/Go"

// HotRestartVersion is what --hot-restart-version and /server_info report when hot
// restart is on; "disabled" otherwise, as Envoy.
const HotRestartVersion = hotrestart.Version

// Server is one running proxy. Create it with New, run it with Run.
type Server struct {
	opts   Options
	log    *slog.Logger
	levels *envoylog.Levels

	boot            *bootstrapv3.Bootstrap
	node            *corev3.Node
	staticClusters  []*cluster.Config
	staticListeners []*listener.Config
	// bootTracer is the bootstrap's tracing.http, the tracer of HCMs whose tracing
	// names no provider; nil for none.
	bootTracer *tracing.Zipkin

	stats    *stats.Store
	clusters *cluster.Manager
	routes   *httpconn.RouteStore
	// routeCache decodes and compiles RDS route configurations.
	routeCache *httpconn.RouteCache
	listeners  *listener.Manager
	xds        *xdsclient.Client
	secrets    *tlsctx.Store // SDS secrets, by name
	sds        *sdsClients

	start        time.Time
	started      chan struct{}
	quit         chan struct{}
	quitOnce     sync.Once
	healthFailed atomic.Bool
	draining     atomic.Bool   // hot restart parent told to drain: state DRAINING
	parentUntil  atomic.Int64  // unix ns: DrainListeners + --parent-shutdown-time-s (its child's Terminate)
	liveCh       chan struct{} // closed when the server goes LIVE
	hr           *hotRestart   // nil: hot restart off
	bg           sync.WaitGroup
	bgCtx        context.Context
	bgCancel     context.CancelFunc

	// originalDst replaces SO_ORIGINAL_DST in tests that run without iptables; nil in
	// production.
	originalDst func(*net.TCPConn) (netip.AddrPort, error)

	mu        sync.Mutex
	adminAddr netip.AddrPort
	adminSrv  *http.Server // nil once a hot restart child shut it down
	startAll  time.Time    // start of the first epoch (uptime_all_epochs)
	dyn       map[string]*typeDump
	init      initState
}

// New loads and checks the bootstrap and compiles its static resources; it opens
// nothing. levels may be nil.
func New(opts Options, logger *slog.Logger, levels *envoylog.Levels) (*Server, error) {
	if levels == nil {
		levels = envoylog.NewLevels(opts.LogLevel)
	}
	s := &Server{
		opts: opts, log: logger, levels: levels,
		stats: stats.NewStore(), routes: httpconn.NewRouteStore(), routeCache: httpconn.NewRouteCache(),
		started: make(chan struct{}), quit: make(chan struct{}),
		dyn: map[string]*typeDump{}, start: time.Now(), liveCh: make(chan struct{}),
	}
	s.startAll = s.start
	if opts.RequestTotalsFile != "" && opts.Mode != ModeValidate {
		t, err := rqtotals.Map(opts.RequestTotalsFile)
		if err != nil {
			logger.Warn(fmt.Sprintf("request totals not shared: %v", err))
		}
		s.stats.SetRequestTotals(t)
	}
	b, err := bootstrap.Load(bootstrap.Source{Path: opts.ConfigPath, YAML: opts.ConfigYAML, AllowUnknown: opts.AllowUnknownStaticFields})
	if err != nil {
		return nil, err
	}
	if err := bootstrap.Check(b); err != nil {
		return nil, err
	}
	f, err := bootstrap.LogFormat(b, opts.LogFormat != DefaultLogFormat)
	if err != nil {
		return nil, err
	}
	if h, ok := logger.Handler().(*envoylog.Handler); ok && f != nil {
		h.SetFormat(f)
	}
	sc, err := bootstrap.StatsConfig(b)
	if err != nil {
		return nil, err
	}
	s.stats.SetConfig(sc) // stats_tags and stats_matcher, as Envoy's tag producer
	s.boot = b
	s.node = nodeFrom(b.GetNode(), opts)
	peer.SetLocal(s.node) // istio-proxy's filters read the node, as Envoy's LocalInfo
	for i, c := range b.GetStaticResources().GetClusters() {
		cfg, err := cluster.Compile(c)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: static_resources.clusters[%d]: %w", i, err)
		}
		s.staticClusters = append(s.staticClusters, cfg)
	}
	for i, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() == "" {
			// Envoy allocates an internal UUID to a listener given without a name, as
			// Istio's bootstrap leaves its 15090 and 15021 listeners.
			l.Name = newUUID()
		}
		cfg, err := listener.Compile(l)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: static_resources.listeners[%d]: %w", i, err)
		}
		s.staticListeners = append(s.staticListeners, cfg)
	}
	if name := bootstrap.XDSCluster(b); name != "" {
		if !s.hasStaticCluster(name) {
			return nil, fmt.Errorf("bootstrap: dynamic_resources.ads_config: envoy_grpc: unknown cluster '%s'", name)
		}
	}
	if s.bootTracer, err = bootstrap.Tracer(b, s.hasStaticCluster); err != nil { // bootstrap/tracing.go
		return nil, err
	}
	s.init = initState{
		cdsWanted: b.GetDynamicResources().GetCdsConfig() != nil,
		ldsWanted: b.GetDynamicResources().GetLdsConfig() != nil,
	}
	return s, nil
}

func (s *Server) hasStaticCluster(name string) bool {
	for _, c := range s.staticClusters {
		if c.Name == name {
			return true
		}
	}
	return false
}

// nodeFrom applies --service-node, --service-cluster and --service-zone as Envoy does.
func nodeFrom(n *corev3.Node, o Options) *corev3.Node {
	out := &corev3.Node{}
	if n != nil {
		out = proto.Clone(n).(*corev3.Node)
	}
	if o.ServiceNode != "" {
		out.Id = o.ServiceNode
	}
	if o.ServiceCluster != "" {
		out.Cluster = o.ServiceCluster
	}
	if o.ServiceZone != "" {
		if out.Locality == nil {
			out.Locality = &corev3.Locality{}
		}
		out.Locality.Zone = o.ServiceZone
	}
	out.UserAgentName = "envoy"
	out.UserAgentVersionType = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: buildVersion()}
	return out
}

// buildVersion is Version as Envoy reports its build in node.user_agent_build_version
// (its version and the labels of its version string), which istioctl's bootstrap view
// and istiod read; a plain user_agent_version would show as "0.0.0".
func buildVersion() *corev3.BuildVersion {
	return &corev3.BuildVersion{
		Version: &typev3.SemanticVersion{MajorNumber: 1},
		Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"build.label":     structpb.NewStringValue("dev"),
			"revision.status": structpb.NewStringValue("Clean"),
			"build.type":      structpb.NewStringValue("RELEASE"),
			"ssl.version":     structpb.NewStringValue("Go"),
		}},
	}
}

// Started is closed once Run has bound the admin and static listeners.
func (s *Server) Started() <-chan struct{} { return s.started }

// AdminAddr returns the bound admin address (valid after Started).
func (s *Server) AdminAddr() netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adminAddr
}

// ListenerAddr returns the bound address of a listener (valid after Started).
func (s *Server) ListenerAddr(name string) (netip.AddrPort, bool) {
	if s.listeners == nil {
		return netip.AddrPort{}, false
	}
	return s.listeners.Addr(name)
}

// StatsStore returns the proxy's stats.
func (s *Server) StatsStore() *stats.Store { return s.stats }

// Run serves until ctx ends or POST /quitquitquit, then stops the listeners, closes the
// admin listener and returns nil. It returns an error when a socket cannot be bound.
func (s *Server) Run(ctx context.Context) error {
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	defer s.bgCancel()
	s.clusters = cluster.NewManager(s.stats)
	s.secrets = tlsctx.NewStore()
	s.sds = newSDSClients()
	defer s.sds.close()
	s.clusters.SetSecrets(s.secrets)
	s.clusters.AddStatic(s.staticClusters)
	// The OpenTelemetry access loggers export through this proxy's clusters.
	accesslog.SetOTelClusters(clusterDialer{s.clusters}, accesslog.NodeInfo{ID: s.node.GetId(), Cluster: s.node.GetCluster(), Zone: s.node.GetLocality().GetZone()})
	s.initServerStats()
	if s.hr == nil && s.opts.RestartEpoch > 0 {
		s.log.Info(fmt.Sprintf("hot restart is disabled: epoch %d starts cold", s.opts.RestartEpoch))
	}
	// As Envoy: the parent's admin listener is shut down before anything is bound.
	s.startAsChild()
	if s.hr == nil || !s.hr.parentAlive {
		s.stats.RequestTotals().Zero() // cold: the counters start at zero, so do the totals
	}
	defer s.clusters.Close()
	tracer := tracing.New(tracing.Node{ID: s.node.GetId(), Cluster: s.node.GetCluster(), Zone: s.node.GetLocality().GetZone(), Address: httpconn.LocalAddress()},
		s.clusters, s.stats, s.log.With("component", "tracing")).WithDefault(s.bootTracer)
	defer tracer.Close() // the OTLP/gRPC exporters' channels
	s.listeners = listener.NewManager(listener.Deps{
		Clusters: s.clusters, Routes: s.routes, Stats: s.stats, Logger: s.log.With("component", "conn_handler"),
		OriginalDst: s.originalDst, InheritSocket: s.inheritSocket,
		DeferAccept: s.hr != nil && s.hr.parentAlive, Secrets: s.secrets,
		DrainTime: s.opts.DrainTime, DrainGradual: s.opts.DrainStrategy == DrainGradual,
		HealthCheckFailed: s.healthFailed.Load,
		Tracer:            tracer,
	})
	defer s.listeners.Close()
	if err := s.listeners.AddStatic(s.staticListeners); err != nil {
		return err
	}
	adminSrv, adminDone, err := s.serveAdmin()
	if err != nil {
		return err
	}
	defer func() {
		// Requests in progress (the /quitquitquit that ended Run) finish first, briefly.
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if adminSrv.Shutdown(sctx) != nil {
			_ = adminSrv.Close()
		}
		<-adminDone
	}()
	if s.opts.Mode == ModeInitOnly {
		close(s.started)
		return nil
	}
	xdsDone := make(chan struct{})
	xdsCtx, stopXDS := context.WithCancel(ctx)
	defer func() {
		stopXDS()
		<-xdsDone
	}()
	if err := s.startXDS(xdsCtx, xdsDone); err != nil {
		return err
	}
	s.watchSecrets() // for TLS in the bootstrap's static clusters and listeners
	s.mu.Lock()
	s.checkInitLocked()
	s.mu.Unlock()
	s.bg.Add(2)
	go func() { defer s.bg.Done(); s.serveChild(s.bgCtx) }()
	go func() { defer s.bg.Done(); s.superviseParent(s.bgCtx) }()
	close(s.started)
	s.log.Info("starting main dispatch loop")
	select {
	case <-ctx.Done():
	case <-s.quit:
	}
	s.log.Info("shutting down server instance")
	s.finishParentDrain()
	s.bgCancel()
	s.bg.Wait()
	return nil
}

func (s *Server) serveAdmin() (*http.Server, <-chan struct{}, error) {
	done := make(chan struct{})
	srv := &http.Server{Handler: admin.NewHandler(adminBackend{s}), ReadHeaderTimeout: 10 * time.Second}
	sa := s.boot.GetAdmin().GetAddress().GetSocketAddress()
	if sa == nil {
		close(done)
		return srv, done, nil
	}
	ap, err := cluster.SocketAddr(sa)
	if err != nil {
		return nil, nil, fmt.Errorf("admin address: %w", err)
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, nil, fmt.Errorf("listen on admin address %s: %w", ap, err)
	}
	bound, _ := netip.ParseAddrPort(ln.Addr().String())
	s.mu.Lock()
	s.adminAddr = bound
	s.adminSrv = srv
	s.mu.Unlock()
	if p := s.opts.AdminAddressPath; p != "" {
		if err := os.WriteFile(p, []byte(bound.String()), 0o644); err != nil {
			_ = ln.Close()
			return nil, nil, fmt.Errorf("write admin address path: %w", err)
		}
	}
	s.log.With("component", "admin").Info(fmt.Sprintf("admin address: %s", bound))
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return srv, done, nil
}

// startXDS opens the ADS stream when the bootstrap has dynamic resources.
func (s *Server) startXDS(ctx context.Context, done chan struct{}) error {
	name := bootstrap.XDSCluster(s.boot)
	if name == "" {
		close(done)
		return nil
	}
	cl, _ := s.clusters.Get(name)
	conn, err := grpc.NewClient("passthrough:///"+name,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			h, err := cl.Pick(netip.AddrPort{})
			if err != nil {
				return nil, err
			}
			return cl.Dial(ctx, h)
		}))
	if err != nil {
		close(done)
		return fmt.Errorf("create grpc client for %s: %w", name, err)
	}
	var wild []string
	if s.init.cdsWanted {
		wild = append(wild, xdsclient.ClusterType)
	} else if s.init.ldsWanted {
		wild = append(wild, xdsclient.ListenerType)
		s.init.ldsRequested = true
	}
	if bootstrap.MetadataDiscovery(s.boot) {
		wild = append(wild, xdsclient.WorkloadType)
	}
	connected := s.stats.Named("control_plane").Gauge("connected_state")
	s.xds = xdsclient.New(xdsclient.Options{
		Conn: conn, Node: s.node, Handler: s, Logger: s.log.With("component", "config"),
		NodeOnFirstMessage: s.boot.GetDynamicResources().GetAdsConfig().GetSetNodeOnFirstMessageOnly(),
		Delta:              s.boot.GetDynamicResources().GetAdsConfig().GetApiType() == corev3.ApiConfigSource_DELTA_GRPC,
		Wildcard:           wild,
		OnConnected: func(ok bool) {
			if ok {
				connected.Set(1)
			} else {
				connected.Set(0)
			}
		},
	})
	go func() {
		defer close(done)
		defer conn.Close()
		_ = s.xds.Run(ctx)
	}()
	return nil
}

// Quit asks Run to return, as POST /quitquitquit does.
func (s *Server) Quit() { s.quitOnce.Do(func() { close(s.quit) }) }

// State returns the server state as /ready and /server_info report it.
func (s *Server) State() adminv3.ServerInfo_State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *Server) stateLocked() adminv3.ServerInfo_State {
	switch {
	case !s.init.clusterInit(s):
		return adminv3.ServerInfo_PRE_INITIALIZING
	case !s.init.live:
		return adminv3.ServerInfo_INITIALIZING
	case s.healthFailed.Load() || s.draining.Load():
		return adminv3.ServerInfo_DRAINING
	}
	return adminv3.ServerInfo_LIVE
}

// drainListeners stops listeners now or, graceful, drains their connections (HTTP/1
// Connection: close, idle keep-alive connections closed) and stops them after
// --drain-time-s (never, with skip_exit).
func (s *Server) drainListeners(inboundOnly, graceful, skipExit bool) {
	if !graceful {
		s.listeners.StopListeners(inboundOnly)
		return
	}
	s.listeners.Drain(inboundOnly)
	s.log.Info(fmt.Sprintf("draining listeners for %s", s.opts.DrainTime))
	if skipExit {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTimer(s.opts.DrainTime)
		defer t.Stop()
		select {
		case <-t.C:
			s.listeners.StopListeners(inboundOnly)
		case <-s.bgCtx.Done():
		}
	}()
}

// newUUID returns a random (version 4) UUID, as Envoy names unnamed static listeners.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// clusterDialer dials a host of a cluster of the manager, through the cluster's
// transport socket: what Envoy's envoy_grpc clients (the OpenTelemetry access logger)
// connect with.
type clusterDialer struct{ m *cluster.Manager }

var _ accesslog.ClusterDialer = clusterDialer{}

// DialCluster picks a host of the named cluster and dials it.
func (d clusterDialer) DialCluster(ctx context.Context, name string) (net.Conn, error) {
	c, ok := d.m.Get(name)
	if !ok {
		return nil, fmt.Errorf("dial cluster %s: no such cluster", name)
	}
	h, err := c.Pick(netip.AddrPort{})
	if err != nil {
		return nil, fmt.Errorf("dial cluster %s: %w", name, err)
	}
	return c.Dial(ctx, h)
}
