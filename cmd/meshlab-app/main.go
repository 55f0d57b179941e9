// Command meshlab-app is the built-in demo app as a small binary of its own: what
// `meshlab app` runs, for every persona but fortio and grpc-echo (demoapp.LinksAll), with
// the same flags (demoapp.Args). The lab runs it for a pod's app when it sits beside
// meshlab (make builds both into bin/), else `meshlab app`, and it is that app's pod init
// too (netns/podinit: the sandbox, then a reaper of a few hundred bytes). It links
// demoapp, netns and the standard library, no Kubernetes, Istio, Envoy, gRPC or gin
// types, so a process starts in a few milliseconds and holds ~1.4 MB of its own where
// `meshlab app` holds ~6.6 MB of the one binary's package init: the app is all an
// ambient pod costs (docs/ARCHITECTURE.md, "Processes per pod").
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/demoapp"
	_ "github.com/meshlab/meshlab/netns" // a pod's init: the lab starts this binary as the pod init that becomes the app (podinit)
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "meshlab-app:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg demoapp.Config
	fs := pflag.NewFlagSet("meshlab-app", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if demoapp.LinksAll(cfg.Persona) {
		return fmt.Errorf("persona %s runs in `meshlab app`, not in this binary", cfg.Persona)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getpid() == 1 {
		go reapOrphans() // the pod's init is this app (podinit's InProcess)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "app", "pod", cfg.Pod)
	return demoapp.Run(ctx, cfg, logger)
}

// reapOrphans reaps what the pod's processes leave behind when this app is PID 1 of the
// pod's PID namespace: orphans (of a command `meshlab exec` ran in the pod) are
// re-parented to it. The app starts no process of its own, so every child is one.
func reapOrphans() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGCHLD)
	for range sigs {
		for {
			var ws unix.WaitStatus
			if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
