package demoapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// serveGRPCEcho serves the grpc-echo persona; package demoapp/grpcecho sets it.
var serveGRPCEcho func(ctx context.Context, lns []net.Listener, pod string, log *slog.Logger) error

// RegisterGRPCEcho makes Run serve the grpc-echo persona with serve (package
// demoapp/grpcecho calls it when linked); serve owns the listeners.
func RegisterGRPCEcho(serve func(ctx context.Context, lns []net.Listener, pod string, log *slog.Logger) error) {
	serveGRPCEcho = serve
}

// serveOTelCollector serves the opentelemetry-collector persona; package demoapp/otelcol
// sets it.
var serveOTelCollector func(ctx context.Context, lns []net.Listener, pod string, log *slog.Logger) error

// RegisterOTelCollector makes Run serve the opentelemetry-collector persona with serve
// (package demoapp/otelcol calls it when linked); serve owns the listeners.
func RegisterOTelCollector(serve func(ctx context.Context, lns []net.Listener, pod string, log *slog.Logger) error) {
	serveOTelCollector = serve
}

func closeAll(lns []net.Listener) {
	for _, l := range lns {
		_ = l.Close()
	}
}

// shutdownGrace is how long in-flight requests may finish once Run's context ends.
const shutdownGrace = 5 * time.Second

// Run serves c until ctx ends, then lets in-flight requests finish (for a few seconds)
// and returns nil. It returns an error at once when c is invalid or a port cannot be
// listened on, and when a listener fails while serving.
func Run(ctx context.Context, c Config, log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("check app config: %w", err)
	}
	if c.Persona == PersonaFortio {
		return errors.New("persona fortio is served by package demoapp/fortio (meshlab app runs it), not by demoapp.Run")
	}
	if c.Persona == PersonaSleep {
		log.Info("sleeping: this pod serves nothing (exec into it)")
		<-ctx.Done()
		return nil
	}
	if c.Persona == PersonaSquid {
		return serveSquid(ctx, c.VolumeRoot, log) // squid.go: its http_port is squid.conf's
	}
	addr := c.Address
	if !addr.IsValid() {
		addr = netip.IPv4Unspecified()
	}
	if c.Persona == PersonaGrafana {
		return serveGrafana(ctx, addr.String(), c.VolumeRoot, log) // grafana.go: on its http_port
	}
	if c.Persona == PersonaKiali {
		return serveKiali(ctx, addr.String(), c.VolumeRoot, log) // kiali.go: on config.yaml's server.port
	}
	ports, prefix := c.Ports, ""
	if c.Persona == PersonaTCPEcho {
		ports, prefix, _ = tcpEchoArgs(c.PersonaArgs) // validated above
	}
	if isTracingAddon(c.Persona) {
		ports = tracingAddonPorts(c.Persona)
	}
	var lc net.ListenConfig
	lns := make([]net.Listener, 0, len(ports))
	for _, port := range ports {
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr.String(), strconv.Itoa(int(port))))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("listen: %w", err)
		}
		lns = append(lns, ln)
	}
	if c.Persona == PersonaTCPEcho {
		return serveTCPEcho(ctx, lns, prefix, log)
	}
	if c.Persona == PersonaGRPCEcho {
		if serveGRPCEcho == nil {
			closeAll(lns)
			return errors.New("persona grpc-echo is served by package demoapp/grpcecho, which this binary does not link (meshlab app does)")
		}
		return serveGRPCEcho(ctx, lns, c.Pod, log)
	}
	if c.Persona == PersonaOTelCollector {
		if serveOTelCollector == nil {
			closeAll(lns)
			return errors.New("persona opentelemetry-collector is served by package demoapp/otelcol, which this binary does not link (meshlab app does)")
		}
		return serveOTelCollector(ctx, lns, c.Pod, log)
	}
	if isTracingAddon(c.Persona) {
		return serveTracingAddon(ctx, c.Persona, lns, log) // tracestore.go
	}
	if c.Persona == PersonaNginx {
		return serveNginx(ctx, lns, c.Pod, c.VolumeRoot, log) // nginx.go
	}
	h := newHandler(c, log)
	// Startup calls go out at once, while the app already serves: as an app that calls
	// out when it starts, before (or after) its sidecar is ready.
	var wg sync.WaitGroup
	defer wg.Wait() // serve returns once ctx ends, which aborts a call in flight
	wg.Go(func() { h.startup.run(ctx, h) })
	return serve(ctx, h, lns, log)
}

// serve runs h on every listener until ctx ends or one fails, then shuts down. It owns
// the listeners.
func serve(ctx context.Context, h *handler, lns []net.Listener, log *slog.Logger) error {
	defer h.client.CloseIdleConnections()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		log.Info("listening", "addr", ln.Addr().String())
		go func() { errc <- srv.Serve(ln) }()
	}
	var failed error
	pending := len(lns)
	select {
	case <-ctx.Done():
	case err := <-errc:
		pending--
		failed = fmt.Errorf("serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: requests still running, closing them", "err", err)
		_ = srv.Close()
	}
	for range pending {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && failed == nil {
			failed = fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("stopped")
	return failed
}
