package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"

	"github.com/meshlab/meshlab/dataplane/proxy/envoylog"
	"github.com/meshlab/meshlab/dataplane/proxy/hotrestart"
	"github.com/meshlab/meshlab/dataplane/rqtotals"
	"github.com/meshlab/meshlab/dataplane/startgc"
)

// Main runs the proxy with Envoy's command line and returns the process exit status:
// 0 after a clean shutdown (ctx ended, or /quitquitquit), --version, --hot-restart-version
// or a successful --mode validate; 1 for a bad command line or configuration.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := ParseArgs(args)
	opts.RequestTotalsFile = os.Getenv(rqtotals.Env)
	var pe *ParseError
	if errors.As(err, &pe) && pe.Help {
		fmt.Fprintln(stdout, pe.Msg)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%v\n\nBrief USAGE: \n   meshlab proxy  [-c <string>] [--config-yaml <string>] [--restart-epoch <uint32_t>] [--base-id <uint32_t>] ...\n\nFor complete USAGE and HELP type: \n   meshlab proxy  --help\n", err)
		return 1
	}
	if opts.Version {
		fmt.Fprintf(stdout, "\nmeshlab proxy  version: %s\n\n", Version)
		return 0
	}
	if opts.HotRestartVersion {
		// Envoy prints it to stderr.
		if opts.DisableHotRestart {
			fmt.Fprintln(stderr, "disabled")
		} else {
			fmt.Fprintln(stderr, HotRestartVersion)
		}
		return 0
	}
	logw := stderr
	if opts.LogPath != "" {
		f, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "error: open log path %s: %v\n", opts.LogPath, err)
			return 1
		}
		defer f.Close()
		logw = f
	}
	levels := envoylog.NewLevels(opts.LogLevel)
	for name, l := range opts.ComponentLevels {
		if err := levels.Set(name, l); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
	}
	logger := slog.New(envoylog.NewHandler(logw, levels, os.Getpid()))
	started := tuneGC(os.Getenv)
	setWorkers(opts.Concurrency, os.Getenv)
	return run(ctx, opts, logger, levels, stdout, started)
}

// proxyGCPercent is the proxy's GOGC unless the environment sets one. The proxy's live
// heap is 2-3 MB while every request allocates ~12 KB, so with Go's default (100) it
// collects dozens of times a second under load. 200 halves the collections (GC CPU about
// 7 % -> 3.5 % of the proxy micro-benchmark's CPU) for ~6 MB more private memory per
// busy sidecar (RssAnon 17 -> 24 MB; idle unchanged); 400 doubled it for little more.
// memory.go hands the headroom back to the OS once the proxy is idle again.
const proxyGCPercent = 200

// startupMemoryLimit is the proxy's memory limit while it starts with its collector
// paused (tuneGC): a start-up that allocates more than this still collects.
const startupMemoryLimit = 64 << 20

// startGCEnv is startgc.Env, the variable the agent sets to "paused" for a proxy whose
// collector its environment paused.
const startGCEnv = startgc.Env

// tuneGC sets the proxy's GC when GOGC is not set in the environment (getenv): paused
// while the proxy starts, under startupMemoryLimit (unless GOMEMLIMIT is set), and the
// steady-state GC percent, proxyGCPercent, from when the returned started func is called
// (once the initial configuration is applied: memory.go).
//
// Why paused: a proxy's start allocates ~10 MB over a live heap of ~6 MB (the package
// inits' registries, then the bootstrap's and the first xDS responses' protobuf types),
// and every cycle marks all of it plus the large binary's globals: with Go's default
// trigger the collector was a fifth of the proxy's start CPU in a `perf record` of a
// 100-pod `up` (docs/BENCHMARKS.md, "100 pods"). The garbage is returned to the OS once
// LIVE by the memory trimmer's first trim.
//
// Started by the agent, the collector is already paused by the environment (GOGC=off
// and a GOMEMLIMIT, with startgc.Env=paused: the agent's StartupGCEnv, so package init's
// collection is skipped too); started then sets proxyGCPercent and no memory limit.
func tuneGC(getenv func(string) string) (started func()) {
	return startgc.Pause(getenv, startupMemoryLimit, proxyGCPercent)
}

// setWorkers gives the proxy as many Go Ps (threads running Go code at once) as Envoy would
// run worker threads for --concurrency: n, or 1 for 0 (Envoy still runs one worker then).
// Istio's sidecars run with 2, so a sidecar uses at most two cores however many the
// machine has, as Envoy's would. A GOMAXPROCS in the environment wins.
func setWorkers(n uint32, getenv func(string) string) {
	if getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(max(int(n), 1))
}

func run(ctx context.Context, opts Options, logger *slog.Logger, levels *envoylog.Levels, stdout io.Writer, started func()) int {
	hrVersion := HotRestartVersion
	if opts.DisableHotRestart {
		hrVersion = "disabled"
	}
	logger.Info(fmt.Sprintf("initializing epoch %d (base id=%d, hot restart version=%s)", opts.RestartEpoch, opts.BaseID, hrVersion))
	logger.Info(fmt.Sprintf("statically linked extensions: %s", "envoy.filters.network.tcp_proxy, envoy.filters.network.http_connection_manager, envoy.filters.http.router, envoy.filters.listener.original_dst"))
	srv, err := New(opts, logger, levels)
	if err != nil {
		logger.Log(ctx, envoylog.LevelCritical, fmt.Sprintf("error initializing configuration '%s': %v", opts.ConfigPath, err))
		return 1
	}
	if opts.Mode == ModeValidate {
		fmt.Fprintf(stdout, "configuration '%s' OK\n", opts.ConfigPath)
		return 0
	}
	var hr *hotrestart.Restarter
	if !opts.DisableHotRestart {
		if hr, err = newRestarter(opts, logger); err != nil {
			logger.Log(ctx, envoylog.LevelCritical, err.Error())
			return 1
		}
		defer hr.Close()
		srv.UseHotRestart(hr)
		opts.BaseID = hr.BaseID()
	}
	if opts.BaseIDPath != "" {
		if err := os.WriteFile(opts.BaseIDPath, []byte(strconv.FormatUint(uint64(opts.BaseID), 10)), 0o644); err != nil {
			logger.Log(ctx, envoylog.LevelCritical, fmt.Sprintf("unable to write base id to %s: %v", opts.BaseIDPath, err))
			return 1
		}
	}
	defer trimMemory(ctx, srv.liveCh, started)()
	if err := srv.Run(ctx); err != nil {
		logger.Log(ctx, envoylog.LevelCritical, fmt.Sprintf("error: %v", err))
		return 1
	}
	logger.Info("exiting")
	return 0
}

// trimMemory starts the proxy's memory trimmer (memory.go), which calls started and
// first trims when live is closed, and returns the func that stops it and waits for it
// to end.
func trimMemory(ctx context.Context, live <-chan struct{}, started func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m := newMemTrimmer()
		m.started = started
		m.run(ctx, live)
	}()
	return func() {
		cancel()
		<-done
	}
}

// newRestarter binds the hot restart sockets for --base-id, or, with
// --use-dynamic-base-id, for the first of up to 100 random ids that is free, as Envoy.
func newRestarter(opts Options, logger *slog.Logger) (*hotrestart.Restarter, error) {
	o := hotrestart.Options{BaseID: opts.BaseID, Epoch: opts.RestartEpoch, Logger: logger.With("component", "main")}
	if !opts.UseDynamicBaseID {
		return hotrestart.New(o)
	}
	for range 100 {
		o.BaseID = rand.Uint32() & 0x0FFFFFFF
		if r, err := hotrestart.New(o); err == nil {
			return r, nil
		}
	}
	return nil, errors.New("unable to select a dynamic base id")
}
