package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/dataplane/startgc"
)

// deps are the parts of Run that tests replace.
type deps struct {
	launch     launcher
	lookup     lookup
	listenHost string              // where the status port listens: "0.0.0.0" in a pod, loopback in tests
	tune       func(*epochManager) // optional: tests shorten the manager's timings
	// settled is called once, when the first proxy epoch is LIVE (optional): Run returns
	// the start-up's garbage to the OS then.
	settled func()
}

// Run runs one pod's agent: it binds agent.sock, the status port and the DNS proxy, starts
// the proxy (epoch 0) and the name-table poller, and blocks until ctx ends. Then it drains
// and stops the proxy, stops its servers, removes agent.sock and returns. It returns an
// error if c is invalid, a port or socket cannot be bound, or a server fails.
//
// It tunes the Go runtime for a supervisor that idles: one P (the agent's work is a few
// requests at a time; one P also keeps one set of per-P span caches instead of one per
// core, and stops the runtime's periodic GOMAXPROCS re-reading), unless GOMAXPROCS is set
// in the environment; and once the proxy is LIVE the heap of the start-up (certificate,
// bootstrap, first status reads) is collected and handed back to the OS. Until then (at
// most startupGCPauseMax) its collector is paused (pauseGC).
func Run(ctx context.Context, c Config, log *slog.Logger) error {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	resume := pauseGC(os.Getenv)
	t := time.AfterFunc(startupGCPauseMax, resume)
	defer t.Stop()
	settled := func() {
		resume()
		debug.FreeOSMemory()
	}
	return run(ctx, c, log, deps{launch: execLauncher{}, lookup: osLookup, listenHost: "0.0.0.0", settled: settled})
}

// The agent's collector while it starts: paused, under a memory limit.
const (
	startupMemoryLimit = 32 << 20
	startupGCPauseMax  = 10 * time.Second
)

// StartGCEnv names the environment variable that says a process of the meshlab binary
// was started with its collector paused by the environment (StartupGCEnv) and is to
// resume its own steady-state GC once started; the agent and `meshlab proxy` read it.
const StartGCEnv = startgc.Env

// StartupGCEnv is the environment the lab starts agents with and an agent starts its
// proxy with: the collector off from the first instruction, under a memory limit, until
// the process resumes it (pauseGC; the proxy's tuneGC). Pausing from main is too late
// for one collection: package init allocates past the runtime's 4 MB first goal, and that
// collection cost each process 3-5 ms of CPU (`perf stat -r 30 meshlab version`, GOGC=off
// against the default).
func StartupGCEnv() []string {
	return []string{"GOGC=off", "GOMEMLIMIT=64MiB", StartGCEnv + "=paused"}
}

// withStartupGCEnv returns env without any GOGC, GOMEMLIMIT or StartGCEnv, plus
// StartupGCEnv.
func withStartupGCEnv(env []string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "GOGC" && k != "GOMEMLIMIT" && k != StartGCEnv {
			out = append(out, kv)
		}
	}
	return append(out, StartupGCEnv()...)
}

// pauseGC pauses the collector, under startupMemoryLimit (unless GOMEMLIMIT is set),
// when GOGC is not set in the environment (getenv), and returns the func that resumes
// it (idempotent; safe from any goroutine).
//
// Why: the agent's start (certificate, SDS, bootstrap, the proxy's first states)
// allocates a few MB over the package inits' live heap, and with Go's default trigger
// each collection marked all of it and the large binary's globals: the collector was a
// fifth of the agent's start CPU in a `perf record` of a 100-pod `up`
// (docs/BENCHMARKS.md, "100 pods"). The garbage is handed back once LIVE (settled).
//
// Started with StartupGCEnv (by the lab), the collector is already paused by the
// environment; resume then sets Go's defaults (GC percent 100, no memory limit).
// Otherwise resume puts back the limit found and GC percent 100 (GOGC is unset here).
func pauseGC(getenv func(string) string) (resume func()) {
	return startgc.Pause(getenv, startupMemoryLimit, 100)
}

func run(ctx context.Context, c Config, log *slog.Logger, d deps) (err error) {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return err
	}
	log = log.With("component", "agent", "pod", c.Pod)
	if c.Proxyless {
		return runProxyless(ctx, c, log, d) // proxyless.go: no proxy, no DNS proxy
	}

	// Each epoch resolves the data plane (its settings may name another binary); one that
	// cannot be found fails the pod with a message in its status, rather than the agent,
	// so the lab can show why. Logged here so that the agent log says it at once.
	if _, err := resolveProxy(c, d.lookup); err != nil {
		log.Error("resolve proxy binary", "err", err)
	}

	// Bind everything before starting the proxy, so that a clash fails at once.
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range closers {
				_ = c()
			}
		}
	}()
	sockPath := SocketPath(c.RunDir)
	sockLn, healthLn, err := listenAPIAndStatus(c, d)
	if err != nil {
		return err
	}
	closers = append(closers, sockLn.Close, healthLn.Close)
	dnsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(c.DNSPort)))
	dnsUDP, err := net.ListenPacket("udp", dnsAddr)
	if err != nil {
		return fmt.Errorf("listen on dns port: %w", err)
	}
	closers = append(closers, dnsUDP.Close)
	dnsTCP, err := net.Listen("tcp", dnsAddr)
	if err != nil {
		return fmt.Errorf("listen on dns port: %w", err)
	}
	var certs *certManager
	var sdsLn net.Listener
	if c.TokenPath != "" {
		closers = append(closers, dnsTCP.Close)
		sdsLn, err = listenSDS(SDSSocketPath(c.RunDir), int(c.ProxyGID))
		if err != nil {
			return err
		}
		closers = append(closers, sdsLn.Close)
		if sdsLn, err = onlySameNetNS(sdsLn, log.With("subsystem", "sds")); err != nil {
			return err
		}
		cac, err := newCAClient(c.XDSSocket, c.TokenPath)
		if err != nil {
			return err
		}
		defer cac.Close()
		certs = newCertManager(cac, spiffeID(c.TrustDomain, c.Namespace, c.ServiceAccount), c.CertTTL, log.With("subsystem", "certs"))
	}
	closers = nil // from here on the servers own the listeners

	admin := newAdminClient(c.AdminPort)
	defer admin.close()
	mgr := newEpochManager(&envoyProxy{cfg: c, lookup: d.lookup, launch: d.launch, admin: admin, log: log},
		admin, c.settings(), c.TerminationDrainDuration, log)
	if d.tune != nil {
		d.tune(mgr)
	}
	ready := readiness{serving: mgr.serving, admin: admin}
	if d.settled != nil {
		go whenLive(ctx, mgr, d.settled)
	}
	names := &nameStore{}
	status := func(ctx context.Context) agentapi.Status {
		st := buildStatus(ctx, c.Pod, mgr, ready)
		if certs != nil {
			cs := certs.snapshot()
			st.Cert = &cs
		}
		return st
	}

	// The servers outlive the proxy: its 15021 route reaches the status port until the end.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	svcCtx, stopSvcs := context.WithCancel(context.Background())
	defer stopSvcs()
	svcErrs := make(chan error, 4)
	var wg sync.WaitGroup
	service := func(name string, run func(context.Context) error) {
		wg.Go(func() {
			if err := run(svcCtx); err != nil {
				log.Error("agent service failed", "service", name, "err", err)
				svcErrs <- err
				stopRun() // a pod without its agent services is broken: stop
			}
		})
	}
	service("agent.sock", func(ctx context.Context) error {
		h := sockHandler(status, mgr.changes, mgr, c.AdminPort, log)
		if certs != nil {
			h = withCertRoutes(h, certs, log) // certsock.go
		}
		return serveHTTP(ctx, sockLn, h)
	})
	service("status", func(ctx context.Context) error {
		mux := http.NewServeMux()
		mux.Handle("GET /healthz/ready", healthHandler(ready))
		var metrics http.Handler = newMergedMetrics(admin, appMetricsURL(c.AppMetricsPort, c.AppMetricsPath), log.With("subsystem", "metrics")) // metrics.go
		if c.MetricsLocalhostOnly {
			metrics = localhostOnly(metrics)
		}
		mux.Handle("GET /stats/prometheus", metrics)
		return serveHTTP(ctx, healthLn, mux)
	})
	service("dns", func(ctx context.Context) error {
		return ServeDNS(ctx, dnsUDP, dnsTCP, &dnsHandler{names: names, log: log})
	})
	// The pod as istioctl names it, "<pod>.<namespace>": pod names repeat across namespaces.
	service("nametable", newNameTablePoller(c.LabSocket, c.Pod+"."+c.Namespace, names, log).Run)
	if certs != nil {
		service("certs", certs.Run)
		service("sds", func(ctx context.Context) error { return serveSDS(ctx, sdsLn, certs, c.SystemCAFile, c.VolumeRoot, log) })
		if c.OutputCerts != "" {
			service("output certs", func(ctx context.Context) error { return writeOutputCerts(ctx, certs, c.OutputCerts) })
		}
	}

	_ = mgr.Run(runCtx)
	stopSvcs()
	wg.Wait()
	close(svcErrs)
	if rmErr := os.Remove(sockPath); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		log.Warn("remove agent socket", "err", rmErr)
	}
	if sdsLn != nil {
		if rmErr := os.Remove(SDSSocketPath(c.RunDir)); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			log.Warn("remove sds socket", "err", rmErr)
		}
	}
	var errs []error
	for e := range svcErrs {
		errs = append(errs, e)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("run agent: %w", err)
	}
	log.Info("agent stopped")
	return nil
}

// whenLive calls f once an epoch of mgr is LIVE, unless ctx ends first.
func whenLive(ctx context.Context, mgr *epochManager, f func()) {
	for {
		ch := mgr.changes()
		if st, _, ok := mgr.serving(); ok && st.State == agentapi.EpochLive {
			f()
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// listenAPIAndStatus binds what the agent serves in both modes, sidecar and proxyless: its
// API socket and the status port (pilot-agent's 15020). On error nothing stays bound.
func listenAPIAndStatus(c Config, d deps) (api, status net.Listener, err error) {
	api, err = listenUnix(SocketPath(c.RunDir))
	if err != nil {
		return nil, nil, fmt.Errorf("start agent api: %w", err)
	}
	status, err = net.Listen("tcp", net.JoinHostPort(d.listenHost, strconv.Itoa(int(c.StatusPort))))
	if err != nil {
		_ = api.Close()
		return nil, nil, fmt.Errorf("listen on status port: %w", err)
	}
	return api, status, nil
}
