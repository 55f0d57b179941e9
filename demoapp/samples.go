package demoapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Istio's smaller samples: helloworld (HTTP, its version in every answer) and tcp-echo
// (TCP, each line echoed behind a prefix), as the tasks that use them observe them.

const (
	// PersonaHelloWorld answers GET /hello with "Hello version: <version>, instance: <pod>".
	PersonaHelloWorld = "helloworld"
	// PersonaTCPEcho echoes every line it reads on a TCP connection, behind a prefix; its
	// arguments are the sample's: ports ("9000,9001") and the prefix ("one").
	PersonaTCPEcho = "tcp-echo"
	// PersonaOTelCollector is Istio's samples/open-telemetry collector: OTLP logs taken on
	// its first port and printed as the debug exporter does (package demoapp/otelcol).
	PersonaOTelCollector = "opentelemetry-collector"
)

// newHelloWorld returns the helloworld persona's handler for version, in pod.
func newHelloWorld(version, pod string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "Hello version: %s, instance: %s\n", version, pod)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "Helloworld is healthy")
	})
	return mux
}

// tcpEchoArgs parses the tcp-echo sample's arguments: its ports, comma-separated, and the
// prefix of every echoed line.
func tcpEchoArgs(args []string) ([]uint16, string, error) {
	if len(args) != 2 {
		return nil, "", fmt.Errorf("tcp-echo takes two arguments, ports (\"9000,9001\") and a prefix, not %q", args)
	}
	var ports []uint16
	for p := range strings.SplitSeq(args[0], ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return nil, "", fmt.Errorf("tcp-echo port %q is not a number between 1 and 65535", p)
		}
		ports = append(ports, uint16(n))
	}
	return ports, args[1], nil
}

// serveTCPEcho echoes "<prefix> <line>" for every line of every connection on lns until ctx
// ends. It owns the listeners.
func serveTCPEcho(ctx context.Context, lns []net.Listener, prefix string, log *slog.Logger) error {
	var wg sync.WaitGroup
	conns := make(chan net.Conn)
	stop := context.AfterFunc(ctx, func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	})
	defer stop()
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		log.Info("listening", "addr", ln.Addr().String())
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("accept: %w", err)
					}
					return
				}
				conns <- c
			}
		})
	}
	var open sync.WaitGroup
	go func() { wg.Wait(); close(conns) }()
	for c := range conns {
		open.Go(func() {
			defer c.Close()
			done := context.AfterFunc(ctx, func() { _ = c.Close() })
			defer done()
			echoLines(c, prefix)
		})
	}
	open.Wait()
	close(errc)
	var all []error
	for err := range errc {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// echoLines writes "<prefix> <line>" back for every line read from c, as the sample's server.
func echoLines(c io.ReadWriter, prefix string) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			if _, werr := io.WriteString(c, prefix+" "+line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
