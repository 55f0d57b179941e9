// Command meshlab turns a Linux machine into a real service mesh: network namespaces as
// pods, iptables capture, an embedded xDS server and CA, one agent and sidecar per pod.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCmd()
	args := namespaceFirst(os.Args[1:]) // kubectl -n NS VERB, as Istio's docs write it
	root.SetArgs(args)
	err := explainRefusal(args, root.ExecuteContext(ctx)) // the docs' forms meshlab does not take say why
	stop()
	if err != nil {
		if msg := err.Error(); strings.HasPrefix(msg, kubectlErrorPrefix) || strings.HasPrefix(msg, istioctlErrorPrefix) {
			fmt.Fprintln(os.Stderr, msg) // kubectl's own line, as the docs print it
		} else {
			fmt.Fprintln(os.Stderr, "meshlab:", err)
		}
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

// kubectlErrorPrefix begins the errors worded as kubectl's (notFound), printed as kubectl
// prints them: without meshlab's prefix.
const kubectlErrorPrefix = "Error from server ("

// istioctlErrorPrefix begins the errors worded as istioctl's (cobra's "Error: "), printed
// as istioctl prints them.
const istioctlErrorPrefix = "Error: "
