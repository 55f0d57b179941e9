// Package grpcecho is the built-in app's grpc-echo persona (demoapp.PersonaGRPCEcho), a
// proxyless gRPC app as Istio's grpc-echo sample, and its client. It is a package of its
// own because gRPC's xDS client brings Envoy's API types with it: `meshlab app` links it
// (and registers it with demoapp), the small meshlab-app binary does not.
package grpcecho

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds" // also registers the xds:/// resolver and the file_watcher provider

	"github.com/meshlab/meshlab/demoapp"
)

func init() { demoapp.RegisterGRPCEcho(Serve) }

// Options configures a grpc-echo server or client.
type Options struct {
	// Pod is the name the server answers with (server only).
	Pod string
	// Bootstrap is the gRPC xDS bootstrap's content; nil reads the file
	// GRPC_XDS_BOOTSTRAP names, and without it the server is a plain gRPC server.
	// Optional.
	Bootstrap []byte
	// Plaintext makes Call a client without xDS: plaintext credentials, no
	// resolver of the bootstrap (the target is host:port), as an app outside the mesh
	// (client only). Optional.
	Plaintext bool
}

// NewServer returns grpc-echo's server: xDS-enabled (its listeners, routes and
// mTLS from the control plane) when there is a bootstrap, with plaintext as the
// fallback credentials istiod's plaintext listeners ask for.
func NewServer(o Options) (interface {
	Serve(net.Listener) error
	Stop()
	GracefulStop()
}, error,
) {
	h := &health{pod: o.Pod}
	if o.Bootstrap == nil && os.Getenv("GRPC_XDS_BOOTSTRAP") == "" {
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, h)
		return s, nil
	}
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, fmt.Errorf("grpc-echo: xds server credentials: %w", err)
	}
	opts := []grpc.ServerOption{grpc.Creds(creds)}
	if o.Bootstrap != nil {
		opts = append(opts, xds.BootstrapContentsForTesting(o.Bootstrap))
	}
	s, err := xds.NewGRPCServer(opts...)
	if err != nil {
		return nil, fmt.Errorf("grpc-echo: xds server: %w", err)
	}
	healthpb.RegisterHealthServer(s, h)
	return s, nil
}

// health answers Check with SERVING and who answered whom.
type health struct {
	healthpb.UnimplementedHealthServer
	pod string
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := grpc.SetHeader(ctx, metadata.Pairs("x-pod", h.pod, "x-peer", peerIdentity(ctx))); err != nil {
		return nil, status.Errorf(codes.Internal, "set header: %v", err)
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// peerIdentity is the URI SAN of the caller's certificate (its SPIFFE ID), or "none".
func peerIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "none"
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		for _, c := range ti.State.PeerCertificates {
			for _, u := range c.URIs {
				return u.String()
			}
		}
	}
	return "none"
}

// Serve serves grpc-echo on every listener until ctx ends, answering as pod.
func Serve(ctx context.Context, lns []net.Listener, pod string, log *slog.Logger) error {
	s, err := NewServer(Options{Pod: pod})
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, s.GracefulStop)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		log.Info("grpc-echo listening", "addr", ln.Addr().String(), "xds", os.Getenv("GRPC_XDS_BOOTSTRAP") != "")
		wg.Go(func() { errc <- s.Serve(ln) })
	}
	wg.Wait()
	close(errc)
	if ctx.Err() != nil {
		return nil
	}
	var errs []error
	for err := range errc {
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reply is one call's outcome: who answered and which identity it saw, or the
// call's status code.
type Reply struct {
	Pod  string     `json:"pod,omitempty"`
	Peer string     `json:"peer,omitempty"`
	Code codes.Code `json:"code"`
	Err  string     `json:"err,omitempty"`
}

// Call makes n health checks to target (for instance
// "xds:///echo.default.svc.cluster.local:7070") on one channel, as a proxyless client:
// xDS credentials (mTLS when the control plane says so, else plaintext) and the
// resolver of the bootstrap (o.Bootstrap, else the file GRPC_XDS_BOOTSTRAP names).
func Call(ctx context.Context, target string, n int, o Options) ([]Reply, error) {
	creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return nil, fmt.Errorf("grpc-echo: xds client credentials: %w", err)
	}
	if o.Plaintext {
		creds = insecure.NewCredentials()
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if o.Bootstrap != nil && !o.Plaintext {
		r, err := xds.NewXDSResolverWithConfigForTesting(o.Bootstrap)
		if err != nil {
			return nil, fmt.Errorf("grpc-echo: xds resolver: %w", err)
		}
		opts = append(opts, grpc.WithResolvers(r))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpc-echo: dial %s: %w", target, err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	out := make([]Reply, 0, n)
	for range n {
		var md metadata.MD
		// An xDS channel waits for its first resources; a plaintext one fails at once
		// when the server refuses it (a STRICT server refuses plaintext).
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md), grpc.WaitForReady(!o.Plaintext))
		r := Reply{Code: status.Code(err)}
		if err != nil {
			r.Err = err.Error()
		}
		if v := md.Get("x-pod"); len(v) > 0 {
			r.Pod = v[0]
		}
		if v := md.Get("x-peer"); len(v) > 0 {
			r.Peer = v[0]
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// CallMain is `meshlab app grpc-call`: n calls to target from inside a pod (the
// bootstrap of GRPC_XDS_BOOTSTRAP for xds:/// targets), one line per call with the pod
// that answered, the identity it saw and the status code; it fails when a call failed.
func CallMain(ctx context.Context, w io.Writer, target string, n int, plaintext bool) error {
	if n < 1 {
		return fmt.Errorf("grpc-call: -n %d: want at least 1 call", n)
	}
	if !plaintext && strings.HasPrefix(target, "xds:") && os.Getenv("GRPC_XDS_BOOTSTRAP") == "" {
		return fmt.Errorf("grpc-call %s: GRPC_XDS_BOOTSTRAP is not set: run it in a pod injected with the grpc-agent template (meshlab exec POD -- meshlab app grpc-call ...)", target)
	}
	replies, err := Call(ctx, target, n, Options{Plaintext: plaintext})
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range replies {
		line := fmt.Sprintf("code=%s pod=%s peer=%s", r.Code, cmp.Or(r.Pod, "-"), cmp.Or(r.Peer, "-"))
		if r.Err != "" {
			failed++
			line += " err=" + strconv.Quote(r.Err)
		}
		fmt.Fprintln(w, line)
	}
	if failed > 0 {
		return fmt.Errorf("grpc-call %s: %d of %d calls failed", target, failed, len(replies))
	}
	return nil
}
