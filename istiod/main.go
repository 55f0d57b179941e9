// Command meshlab-istiod is Istio's own istiod discovery server (istio.io/istio's
// pilot/test/xds fake discovery server: a real DiscoveryServer with Istio's generators,
// Kubernetes controllers and config stores over an in-memory Kubernetes client) run as a
// lab's control plane. It lives in a Go module of its own so that istio.io/istio never
// enters the meshlab binary.
//
// The lab starts it with two unix sockets: --xds, where istiod serves ADS (the lab relays
// its proxies' authenticated streams there, recording what istiod sends), and --feed, an
// HTTP API where the lab sends everything it holds as Kubernetes objects (PUT /state, the
// whole set each time: what is new is created, what changed updated, what is gone
// deleted, each reaching istiod's controllers as the API server's watch event would; PUT
// /mesh, the mesh config, as a change of the istio ConfigMap reaches istiod) and
// reaches istiod's debug endpoints (/debug/syncz, /debug/config_dump?proxyID=...,
// /debug/push_status) and its version (/version).
//
// Ambient is istiod's own switch, read once at start: with PILOT_ENABLE_AMBIENT=true in
// the environment (the lab sets it for an ambient lab, as an ambient install does) istiod
// builds its ambient index and serves ztunnel WDS; the feed then also writes the Istio
// kinds that index reads to the Kubernetes API (feed.go, ambientKinds).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/config/mesh"
	istiolog "istio.io/istio/pkg/log"
)

func main() {
	xdsSock := flag.String("xds", "", "unix socket to serve ADS on")
	feedSock := flag.String("feed", "", "unix socket of the feed API (PUT /state, PUT /mesh, /debug/..., /version)")
	meshFile := flag.String("mesh", "", "MeshConfig (YAML) file; Istio's defaults when empty")
	stateFile := flag.String("state", "", "the lab's objects at start (multi-document YAML)")
	debounce := flag.Duration("debounce", 100*time.Millisecond, "istiod's push debounce (PILOT_DEBOUNCE_AFTER)")
	version := flag.Bool("version", false, "print the Istio version this binary was built from and exit")
	flag.Parse()
	if *version {
		fmt.Println(istioVersion())
		return
	}
	if *xdsSock == "" || *feedSock == "" {
		log.Fatal("meshlab-istiod: --xds and --feed are required")
	}
	if err := run(*xdsSock, *feedSock, *meshFile, *stateFile, *debounce); err != nil {
		log.Fatalf("meshlab-istiod: %v", err)
	}
}

func run(xdsSock, feedSock, meshFile, stateFile string, debounce time.Duration) error {
	quietIstio()
	mc := mesh.DefaultMeshConfig()
	if meshFile != "" {
		b, err := os.ReadFile(meshFile)
		if err != nil {
			return err
		}
		if mc, err = mesh.ApplyMeshConfigDefaults(string(b)); err != nil {
			return fmt.Errorf("mesh config %s: %w", meshFile, err)
		}
	}
	var initial state
	if stateFile != "" {
		b, err := os.ReadFile(stateFile)
		if err != nil {
			return err
		}
		if initial, err = parseState(b); err != nil {
			return fmt.Errorf("state %s: %w", stateFile, err)
		}
	}
	for _, p := range []string{xdsSock, feedSock} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	f := &failer{}
	defer f.cleanup()
	fake := startIstiod(f, xdsSock, mc, initial, debounce)
	feed := newFeed(fake, initial)
	ln, err := net.Listen("unix", feedSock)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", feedSock, err)
	}
	srv := &http.Server{Handler: feed.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Printf("istiod %s serving ADS on %s, feed on %s (ambient: %v)", istioVersion(), xdsSock, feedSock, features.EnableAmbient)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

// startIstiod starts Istio's discovery server with the lab's first objects, serving ADS
// on the unix socket xdsSock.
func startIstiod(f *failer, xdsSock string, mc *meshconfig.MeshConfig, initial state, debounce time.Duration) *xds.FakeDiscoveryServer {
	return xds.NewFakeDiscoveryServer(f, xds.FakeOptions{
		KubernetesObjects: initial.kubeObjects(),
		Configs:           initial.istioConfigs(),
		MeshConfig:        mc,
		DebounceTime:      debounce,
		ListenerBuilder: func() (net.Listener, error) {
			ln, err := net.Listen("unix", xdsSock)
			if err == nil {
				err = os.Chmod(xdsSock, 0o600)
			}
			return ln, err
		},
	})
}

// istioVersion is the istio.io/istio module version this binary was built from.
func istioVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "istio.io/istio" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// quietIstio keeps istiod's errors and warnings on stderr (the lab's istiod.log) and
// drops its info lines. MESHLAB_ISTIOD_LOG=debug|info keeps more.
func quietIstio() {
	level := istiolog.WarnLevel
	switch os.Getenv("MESHLAB_ISTIOD_LOG") {
	case "debug":
		level = istiolog.DebugLevel
	case "info":
		level = istiolog.InfoLevel
	}
	for _, s := range istiolog.Scopes() {
		s.SetOutputLevel(level)
	}
}

// failer is the test.Failer the fake discovery server asks for: a failure ends the
// process (the lab sees istiod exit and says so), cleanups run at exit.
type failer struct{ cleanups []func() }

func (f *failer) Fail()                             { log.Fatal("istiod failed") }
func (f *failer) FailNow()                          { log.Fatal("istiod failed") }
func (f *failer) Fatal(args ...any)                 { log.Fatal(args...) }
func (f *failer) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
func (f *failer) Log(args ...any)                   { log.Print(args...) }
func (f *failer) Logf(format string, args ...any)   { log.Printf(format, args...) }
func (f *failer) Helper()                           {}
func (f *failer) Skip(args ...any)                  { log.Print(args...) }
func (f *failer) Cleanup(fn func())                 { f.cleanups = append(f.cleanups, fn) }
func (f *failer) TempDir() string {
	d, err := os.MkdirTemp("", "meshlab-istiod-")
	if err != nil {
		log.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (f *failer) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}
