// Package lab is the lab process: it reads a scenario, creates the lab's namespaces,
// starts the discovery server, the lab API, one agent and one app per pod, supervises them,
// and removes everything again. Everything is recorded in the lab's run directory before
// it is created, so Clean can remove a lab whose process died. Its jobs are wiring,
// supervision, the journal, apply and events; it also serves the lab API's backends, and
// hands observation (topology, traffic, metrics) to lab/observe, request traces to
// lab/trace, CA operations (rotation, clock, renewal) to lab/caops and machinery faults
// to lab/faults, which see the lab only through the narrow view in deps.go.
package lab

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
	"github.com/meshlab/meshlab/lab/ambient"
	"github.com/meshlab/meshlab/lab/caops"
	"github.com/meshlab/meshlab/lab/faults"
	"github.com/meshlab/meshlab/lab/istiodcp"
	"github.com/meshlab/meshlab/lab/podview"
	"github.com/meshlab/meshlab/lab/push"
	"github.com/meshlab/meshlab/netns/kubeproxy"
	"github.com/meshlab/meshlab/web"
)

// Defaults of a lab's address ranges, Kubernetes' usual ones.
var (
	DefaultPodCIDR     = netip.MustParsePrefix("10.244.0.0/16")
	DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")
)

// Identities of the processes a lab starts.
const (
	ProxyUID = 1337 // the sidecar, excluded from capture, as in Istio
	AppUID   = 65532
)

// DefaultXDSHistory is how many config versions the control plane keeps per proxy
// unless Options.XDSHistory says otherwise (`up --xds-history`).
const DefaultXDSHistory = discovery.DefaultHistorySize

// Pods come up in parallel but share the machine: namespaces and links are made a
// few at a time (netSlots), and every agent, proxy and app starts on the same cores, so
// the time to the last pod ready grows with the number of pods. One fixed deadline
// failed healthy pods of large labs: at 500 pods on 2 cores (load 30-50) the last pods
// were ready ~77 s after `up` began, and the 93 still starting at 60 s were reported
// FAILED (docs/BENCHMARKS.md, "500 pods (issue 16)").
const (
	// DefaultReadyTimeout is how long `up` waits for the pods of a lab of up to
	// DefaultReadyTimeout/ReadyTimeoutPerPod (200) pods.
	DefaultReadyTimeout = 60 * time.Second
	// ReadyTimeoutPerPod is what a larger lab gets per pod: about twice what one pod
	// took at 500 pods on a loaded 2-core machine.
	ReadyTimeoutPerPod = 300 * time.Millisecond
)

// MaxPods is the most pods a lab holds: each pod's link is a port of the node's bridge,
// and Linux numbers a bridge's ports in 10 bits, port 0 unused (BR_MAX_PORTS); the 1024th
// would fail deep into `up` with "exchange full".
const MaxPods = 1023

// ReadyTimeoutFor is the default ReadyTimeout of a lab of pods pods: DefaultReadyTimeout,
// or ReadyTimeoutPerPod per pod when that is longer.
func ReadyTimeoutFor(pods int) time.Duration {
	return max(DefaultReadyTimeout, time.Duration(pods)*ReadyTimeoutPerPod)
}

// Options configure a lab.
type Options struct {
	Name         string // required
	ScenarioFile string // required: the scenario's file name, used in messages
	ScenarioData []byte // required: its contents
	PodCIDR      netip.Prefix
	ServiceCIDR  netip.Prefix
	RunRoot      string // optional, DefaultRunRoot
	MeshlabPath  string // optional: binary providing agent, proxy and app; os.Executable()
	ProxyPath    string // optional: Envoy binary for every pod; "" lets the agent choose
	// TerminationDrain is how long agents let connections drain on shutdown (Istio's
	// terminationDrainDuration).
	TerminationDrain time.Duration
	// ReadyTimeout is how long `up` waits for every pod to become ready; optional, 0 =
	// ReadyTimeoutFor(the number of pods).
	ReadyTimeout time.Duration
	// CACertFile and CAKeyFile are a user-supplied CA root (PEM), both or neither;
	// optional, "" makes a new root per lab. CertTTL is the workload certificate
	// lifetime; optional, 0 = 24h, at least 1s.
	CACertFile, CAKeyFile string
	CertTTL               time.Duration
	// XDSHistory is how many config versions the control plane keeps per proxy;
	// optional, 0 = DefaultXDSHistory.
	XDSHistory int
	// Listen is the TCP address (a specific IP and port) of the dashboard and the API;
	// optional, "" serves them on the unix socket only. ListenFallback picks a free port
	// on the same address when Listen is taken.
	Listen         string
	ListenFallback bool
	// XDSListen is a loopback TCP address to also serve xDS and the CA on, for tools
	// that authenticate with a pod's token (lab/xdsauth.go); optional, "" serves them on
	// the lab's xds.sock only.
	XDSListen string
	// ControlPlane is what generates the proxies' config: "" or "meshlab" (meshlab's own
	// generator) or "istiod" (Istio's istiod, the meshlab-istiod binary: lab/istiodcp).
	// IstiodPath names that binary; optional, found beside MeshlabPath or on PATH.
	ControlPlane, IstiodPath string

	// Prepare is called once the run directory exists, before anything runs in it, to
	// keep files beside the lab that down removes with it (up --from-bug-report keeps the
	// report's proxy dumps there); optional.
	Prepare func(runDir string) error

	// maxPushBytes is the discovery server's limit of one proxy's push of one type;
	// 0 = discovery.MaxPushBytes. The lab's tests set a small one to make one proxy's
	// config fail.
	maxPushBytes int

	Out    io.Writer        // progress lines; optional
	Logger *slog.Logger     // required
	Guide  web.GuideBackend // optional: the guide of `meshlab lab start` (a *runner.Guide), served on /v1/guide
}

// Lab is a running lab.
type Lab struct {
	dnsCerts dnsCertController // dnscerts.go: meshConfig.certificates' Secrets

	opts  Options
	paths Paths
	log   *slog.Logger
	out   io.Writer
	rec   *Record
	sys   system // the kernel and processes, as Start and Clean reach them (system.go)
	jr    *journal
	disc  *discovery.Server
	// istiod is Istio's istiod when it is the control plane (lab/istiodcp); nil otherwise.
	istiod *istiodcp.Istiod
	ca     *caops.CA // the CA, its pod tokens and rotations (lab/caops); nil in bare unit-test Labs
	names  *nameTables
	// kubeDNS is the cluster DNS of the pods without a sidecar (kubedns.go).
	kubeDNS *kubeDNS
	// metrics are the control plane's Prometheus metrics (nil in unit tests' bare Labs).
	metrics *metrics
	faults  faults.Set // machinery faults in force (lab/faults)
	world   *world     // the outside world (lab/world.go); nil until created
	// ambient is istio-cni's node agent (nodeagent.go, lab/ambient); nil in bare unit-test Labs.
	ambient *ambient.NodeAgent
	jwks    jwksCache // key sets fetched for jwksUri (lab/jwks.go)
	// conds remembers the status conditions kubectl read, for their lastTransitionTime (condclock.go).
	conds conditionClock
	// decoded keeps the written Deployments decoded for kubectl's view (kubedecoded.go).
	decoded decodedWorkloads
	live    livePods   // pods added and removed while the lab runs (lab/livepods.go)
	push    push.Queue // applied changes' pushes to the proxies, after apply returns (lab/push)
	// readiness is the pods' PodReady condition, which WDS reads (podready.go).
	readiness podReadiness
	// podview holds the sidecars' settled agent statuses that Pods answers from (lab/podview).
	podview podview.View
	// netSlots bounds how many pods' networks are made at once (pods.go); nil: no bound.
	netSlots chan struct{}

	mu       sync.Mutex
	model    *model.Model
	scenario *config.Scenario // the objects as applied; nil until first needed (lab/apply.go)
	// ztunnelSince is when the lab's ztunnel pod was made (kubectl's AGE); zero before.
	ztunnelSince time.Time
	// kubeProxyRules are the rules last installed in the node namespace ("" when none
	// or unknown): a change that leaves them as they are installs nothing (kubeproxy.go).
	kubeProxyRules string
	// kubeProxyFrom is the configuration kubeProxyRules were rendered from: a change
	// that leaves it as it is renders nothing either.
	kubeProxyFrom kubeproxy.Config

	cancelServers context.CancelFunc
	serverCtx     context.Context // ends when the servers stop
	servers       sync.WaitGroup
	bus           *Bus
	topo          topoPoller
	dashURL       string
	apps, agents  *group
}

// prepare validates everything and builds the model without creating anything.
func prepare(o *Options) (*model.Model, error) {
	if err := ValidateName(o.Name); err != nil {
		return nil, err
	}
	if !o.PodCIDR.IsValid() {
		o.PodCIDR = DefaultPodCIDR
	}
	if !o.ServiceCIDR.IsValid() {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if err := o.caConfig("").Check(); err != nil {
		return nil, err
	}
	if o.XDSListen != "" {
		if _, err := ParseXDSListen(o.XDSListen); err != nil {
			return nil, err
		}
	}
	settings, err := scenarioSettings(o.ScenarioFile, o.ScenarioData) // settings.go
	if err != nil {
		return nil, err
	}
	if o.ControlPlane == "" {
		o.ControlPlane = settings.ControlPlane
	}
	switch o.ControlPlane {
	case "", istiodcp.ControlPlaneMeshlab:
	case istiodcp.ControlPlaneIstiod:
		meshlab := o.MeshlabPath
		if meshlab == "" {
			meshlab, _ = os.Executable()
		}
		p, err := istiodcp.Find(o.IstiodPath, meshlab)
		if err != nil {
			return nil, err
		}
		o.IstiodPath = p
	default:
		return nil, fmt.Errorf("--control-plane %q: want %s or %s", o.ControlPlane, istiodcp.ControlPlaneMeshlab, istiodcp.ControlPlaneIstiod)
	}
	if o.PodCIDR.Overlaps(o.ServiceCIDR) {
		return nil, fmt.Errorf("--pod-cidr %s overlaps --service-cidr %s", o.PodCIDR, o.ServiceCIDR)
	}
	for flag, p := range map[string]netip.Prefix{"--pod-cidr": o.PodCIDR, "--service-cidr": o.ServiceCIDR} {
		if err := checkHostOverlap(p); err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
	}
	sc, err := config.Load(o.ScenarioFile, o.ScenarioData)
	if err != nil {
		return nil, err
	}
	note := func(string) {}
	if o.Out != nil {
		note = func(s string) { fmt.Fprintln(o.Out, s) }
	}
	for _, c := range sc.Skipped {
		note(c.String())
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: o.PodCIDR, ServiceCIDR: o.ServiceCIDR, Note: note})
	if err != nil {
		return nil, err
	}
	for _, p := range m.Pods {
		if p.Key() == nodePodName || p.Key() == worldPodName {
			return nil, fmt.Errorf("%s: Workload %s/%s: metadata.name: %q is reserved for the lab's own namespace %s", o.ScenarioFile, p.Namespace, p.Workload, p.Name, NamespaceName(o.Name, p.Name))
		}
	}
	if len(m.Pods) > MaxPods {
		return nil, fmt.Errorf("%s: %d pods: a lab's pods are ports of one Linux bridge (%s in %s), which holds at most %d; split the scenario into labs of at most %d pods", o.ScenarioFile, len(m.Pods), bridgeName, NodeNamespace(o.Name), MaxPods, MaxPods)
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = ReadyTimeoutFor(len(m.Pods))
	}
	return m, nil
}

// Validate checks a scenario and options exactly as Start would, creating nothing.
func Validate(o Options) error {
	_, err := prepare(&o)
	return err
}

// Start validates the scenario, creates the lab and returns once every pod is ready (or
// fails, having removed whatever it created).
func Start(ctx context.Context, o Options) (*Lab, error) { return start(ctx, o, host) }

// start is Start on the system sys.
func start(ctx context.Context, o Options, sys system) (*Lab, error) {
	m, err := prepare(&o)
	if err != nil {
		return nil, err
	}
	if o.RunRoot == "" {
		o.RunRoot = DefaultRunRoot
	}
	if o.MeshlabPath == "" {
		if o.MeshlabPath, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find meshlab binary: %w", err)
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if err := checkExecutableByApps(o.MeshlabPath); err != nil {
		return nil, err
	}
	if w := hostNeighbourWarning(len(m.Pods)); w != "" {
		fmt.Fprintln(o.Out, w)
	}
	paths := PathsFor(o.RunRoot, o.Name)
	if Running(paths) {
		return nil, fmt.Errorf("lab %q is already running (stop it with: meshlab down --name %s)", o.Name, o.Name)
	}
	if _, err := os.Stat(paths.Dir); err == nil {
		o.Logger.Info("removing what a previous run of this lab left behind", "lab", o.Name)
		if err := clean(sys, o.RunRoot, o.Name, o.Logger); err != nil {
			return nil, fmt.Errorf("clean up previous run of lab %q: %w", o.Name, err)
		}
	}

	l := &Lab{opts: o, paths: paths, sys: sys, log: o.Logger.With("lab", o.Name), out: o.Out, model: m, bus: NewBus(defaultHistory), metrics: newMetrics()}
	if err := l.create(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) create(ctx context.Context) error {
	start := time.Now()
	if err := os.MkdirAll(l.paths.Dir, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	// The run directory is traversed by the proxy (uid 1337) to reach xds.sock and its
	// bootstrap; nothing secret lives in it at this stage.
	if err := os.Chmod(l.paths.Dir, 0o755); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	if l.opts.Prepare != nil {
		if err := l.opts.Prepare(l.paths.Dir); err != nil {
			return err
		}
	}
	pidStart, _ := processStart(os.Getpid())
	l.rec = &Record{
		Name: l.opts.Name, PID: os.Getpid(), PIDStart: pidStart, Scenario: l.opts.ScenarioFile,
		PodCIDR: l.opts.PodCIDR, ServiceCIDR: l.opts.ServiceCIDR, Created: time.Now().UTC(),
	}
	for _, p := range l.model.Pods {
		l.rec.Pods = append(l.rec.Pods, podRecord(l.opts.Name, l.paths.PodDir(p.Key()), p))
	}
	l.rec.Services = serviceRecords(l.model)
	if err := writeRecord(l.paths.Record(), l.rec); err != nil {
		return err
	}
	jr, err := openJournal(l.paths.Journal())
	if err != nil {
		return err
	}
	l.jr = jr

	if err := l.startServers(); err != nil {
		return err
	}
	if a := l.disc.TCPAddr(); a != nil {
		l.rec.XDSAddr = a.String()
	}
	if err := writeRecord(l.paths.Record(), l.rec); err != nil {
		return err
	}
	if err := l.createNetwork(); err != nil {
		return err
	}
	if err := l.createWorld(); err != nil { // world.go
		return err
	}
	if len(jwksURIs(l.model)) > 0 { // jwks.go: the first push came before the world could answer
		if err := l.updateProxies(ctx, l.model, "jwks"); err != nil && !errors.As(err, new(*discovery.ProxyErrors)) {
			return fmt.Errorf("push the fetched JWKS: %w", err)
		}
	}
	if err := l.setupKubeProxy(); err != nil {
		return err
	}
	l.plugCACerts(ctx) // cacerts.go: a scenario's cacerts Secret signs its pods' certificates
	failed, err := l.startPods(ctx)
	if err != nil {
		return err
	}
	l.dnsCerts.kick(l) // dnscerts.go: a scenario's meshConfig.certificates
	took := time.Since(start).Round(time.Millisecond)
	summary := upSummary(l.opts.Name, len(l.model.Pods), failed, took)
	l.publish(EventLabUp, "", summary, map[string]any{"pods": len(l.model.Pods), "failed": len(failed), "ms": took.Milliseconds()})
	fmt.Fprintln(l.out, summary)
	printGatewayURL(l.out, l.opts.Name, l.model)
	return nil
}

func (l *Lab) startServers() error {
	sctx, cancel := context.WithCancel(context.Background())
	l.cancelServers, l.serverCtx = cancel, sctx
	registerCA, err := l.startCA()
	if err != nil {
		return err
	}
	// With istiod as the control plane (lab/istiodcp), the discovery server relays the
	// proxies' authenticated streams to it. Certificates stay the lab's CA's: the agents'
	// SDS serves them, and istiod's clusters name the same SDS secrets.
	upstream := ""
	if l.opts.ControlPlane == istiodcp.ControlPlaneIstiod {
		d, err := istiodcp.Start(sctx, istiodcp.Options{
			Path: l.opts.IstiodPath, Dir: l.paths.Dir, Model: l.model, Logger: l.log.With("component", "istiod"),
			Node: NodeNamespace(l.opts.Name), Ambient: istiodcp.Ambient(l.model),
			OnExit: func(err error) {
				l.log.Error("istiod stopped", "err", err)
				l.publish("istiod.exited", "", err.Error(), nil)
			},
			OnRestart: func(reason string, pid int) {
				l.log.Info("istiod restarted", "reason", reason, "pid", pid)
				l.publish("istiod.restarted", "", reason, map[string]any{"pid": pid})
				go recordIstiodPID(l, pid) // istiod.go; Feed may run under commit's l.mu
			},
		})
		if err != nil {
			return err
		}
		l.istiod, upstream = d, "unix://"+istiodcp.XDSSocket(l.paths.Dir)
		l.rec.ControlPlane, l.rec.IstiodPID = istiodcp.ControlPlaneIstiod, d.PID()
		if v, err := d.Version(sctx); err == nil {
			l.rec.IstiodVersion = v
			fmt.Fprintf(l.out, "control plane: istiod %s (%s)\n", v, l.opts.IstiodPath)
		}
	}
	disc, err := discovery.New(discovery.Options{
		Upstream:     upstream,
		Logger:       l.log.With("component", "discovery"),
		SocketPath:   l.paths.XDSSocket(),
		SocketGID:    l.syscalls().proxyGID,
		TCPAddr:      l.opts.XDSListen,
		Authorize:    l.proxyAuthorizer(newProxyNodes(l.model)),
		OnRefused:    l.publishXDSRefused,
		TCPTLS:       l.xdsTLS(),
		OnEvent:      l.publishXDS,
		Register:     registerCA,
		HistorySize:  l.opts.XDSHistory,
		MaxPushBytes: l.opts.maxPushBytes,
		WDS:          xds.WDSOptions{Node: NodeNamespace(l.opts.Name), Unhealthy: l.readiness.unhealthy},
	})
	if err != nil {
		return fmt.Errorf("start discovery server: %w", err)
	}
	l.disc = disc
	l.servers.Add(1)
	go func() {
		defer l.servers.Done()
		if err := disc.Run(sctx); err != nil {
			l.log.Error("discovery server stopped", "err", err)
		}
	}()
	// A proxy whose config cannot be generated is that proxy's failure, as in later
	// updates (discovery.ProxyErrors): its pod is reported not ready (waitReady) with the
	// error, which proxy-status and the event bus have too, and the lab comes up.
	if err := l.updateProxies(sctx, l.model, "start"); err != nil && !errors.As(err, new(*discovery.ProxyErrors)) {
		return fmt.Errorf("generate proxy config: %w", err)
	}
	l.names = newNameTables(l.model)
	l.kubeDNS = newKubeDNS(l.model, l.log.With("component", "kube-dns"))
	if l.ambient, err = newNodeAgent(sctx, l); err != nil { // nodeagent.go
		return err
	}

	_ = os.Remove(l.paths.APISocket())
	ln, err := net.Listen("unix", l.paths.APISocket())
	if err != nil {
		return fmt.Errorf("listen on lab API socket: %w", err)
	}
	if err := os.Chmod(l.paths.APISocket(), 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("listen on lab API socket: %w", err)
	}
	l.servers.Add(1)
	go func() {
		defer l.servers.Done()
		watchPromTargets(sctx, l) // promaddon.go
	}()
	h := web.NewHandler(l, l.log.With("component", "api"), l.features()...)
	l.servers.Add(1)
	go func() {
		defer l.servers.Done()
		if err := web.Serve(sctx, ln, h); err != nil && !errors.Is(err, net.ErrClosed) {
			l.log.Error("lab API stopped", "err", err)
		}
	}()
	if l.opts.Listen != "" {
		return l.serveDashboard(sctx, h)
	}
	return nil
}

// Close stops every app, then every agent (which drain and stop their proxies), then the
// servers, and removes everything the lab created. It is safe to call more than once.
func (l *Lab) Close() error {
	l.publish(EventLabDown, "", "lab "+l.opts.Name+" is stopping", nil)
	l.stopLivePods() // livepods.go: no apply makes pods from now on
	if l.apps != nil {
		l.apps.stop()
	}
	if l.agents != nil {
		l.agents.stop()
	}
	l.push.Settle(settleTimeout) // an applied change's push ends before the servers stop
	if l.cancelServers != nil {
		l.cancelServers()
		l.servers.Wait()
		l.topo.Wait()
	}
	if l.istiod != nil {
		l.istiod.Stop()
	}
	if l.jr != nil {
		_ = l.jr.close()
	}
	return clean(l.syscalls(), l.opts.RunRoot, l.opts.Name, l.log)
}

// baseID gives each pod its own Envoy --base-id. Envoy's shared memory and domain sockets
// are named from it, and shared memory is not per network namespace, so ids must differ
// across every pod of every lab on the machine: a per-lab block from the lab name's hash,
// and the pod's index within it.
func baseID(lab string, podIndex int) uint32 {
	h := fnv.New32a()
	h.Write([]byte(lab))
	return (h.Sum32()%40000)*1000 + uint32(podIndex)%1000 + 1
}
