package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// xdsProxy is pilot-agent's XDS proxy (pkg/istio-agent/xds_proxy.go): an ADS server on a
// unix socket inside the pod that relays every stream, SotW or delta, to the lab's
// discovery server on a stream of its own. The agent runs in the pod's network
// namespace, which is how the lab authorizes a stream on its xds.sock (xdsauth.go): a
// relayed stream speaks with the pod's credentials, and only for the pod's node id, as
// a proxyless app's stream through Istio's agent speaks with the agent's. Safe for
// concurrent use.
type xdsProxy struct {
	discoverygrpc.UnimplementedAggregatedDiscoveryServiceServer
	upstream *grpc.ClientConn
	target   string // the lab's xds socket, for status
	log      *slog.Logger

	mu        sync.Mutex
	streams   map[*relayStream]struct{}
	total     int
	lastErr   string
	lastErrAt time.Time
}

// relayStream is one open stream's counters (guarded by xdsProxy.mu).
type relayStream struct{ st agentapi.XDSRelayStream }

// newXDSProxy connects (lazily) to the discovery server on the unix socket xdsSocket.
func newXDSProxy(xdsSocket string, log *slog.Logger) (*xdsProxy, error) {
	conn, err := grpc.NewClient("unix://"+xdsSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect xds proxy to %s: %w", xdsSocket, err)
	}
	return &xdsProxy{upstream: conn, target: xdsSocket, log: log, streams: map[*relayStream]struct{}{}}, nil
}

// Close closes the upstream connection.
func (p *xdsProxy) Close() error { return p.upstream.Close() }

// serve serves ADS on ln until ctx ends, then stops every stream.
func (p *xdsProxy) serve(ctx context.Context, ln net.Listener) error {
	s := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s, p)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve xds proxy on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.Stop() // an xDS stream never ends by itself: GracefulStop would wait forever
	<-done
	return nil
}

// status returns the relay's state for Status.Proxyless.
func (p *xdsProxy) status() agentapi.XDSRelayStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := agentapi.XDSRelayStatus{Upstream: p.target, Total: p.total, LastError: p.lastErr, LastErrorAt: p.lastErrAt}
	for rs := range p.streams {
		st.Streams = append(st.Streams, rs.st)
	}
	return st
}

// StreamAggregatedResources relays a SotW ADS stream.
func (p *xdsProxy) StreamAggregatedResources(down grpc.BidiStreamingServer[discoverygrpc.DiscoveryRequest, discoverygrpc.DiscoveryResponse]) error {
	return relay(p, down, false, discoverygrpc.NewAggregatedDiscoveryServiceClient(p.upstream).StreamAggregatedResources)
}

// DeltaAggregatedResources relays a delta ADS stream.
func (p *xdsProxy) DeltaAggregatedResources(down grpc.BidiStreamingServer[discoverygrpc.DeltaDiscoveryRequest, discoverygrpc.DeltaDiscoveryResponse]) error {
	return relay(p, down, true, discoverygrpc.NewAggregatedDiscoveryServiceClient(p.upstream).DeltaAggregatedResources)
}

// relay copies requests from down to a new upstream stream and responses back, until
// either side ends: the app closing its stream ends the upstream one, and the discovery
// server ending (or refusing) the upstream stream ends the app's with the same status,
// so an app whose node id is not its pod's sees the lab's PermissionDenied.
func relay[Req, Resp any](p *xdsProxy, down grpc.BidiStreamingServer[Req, Resp], delta bool,
	open func(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[Req, Resp], error),
) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	first, err := down.Recv()
	if err != nil {
		return err
	}
	var node string
	if n, ok := any(first).(interface{ GetNode() *corev3.Node }); ok {
		node = n.GetNode().GetId()
	}
	rs := &relayStream{st: agentapi.XDSRelayStream{Node: node, Delta: delta, Since: time.Now()}}
	p.mu.Lock()
	p.streams[rs] = struct{}{}
	p.total++
	p.mu.Unlock()
	log := p.log.With("node", rs.st.Node, "delta", delta)
	log.Info("xds proxy: stream opened")
	err = func() error {
		up, err := open(ctx)
		if err != nil {
			return fmt.Errorf("open upstream stream: %w", err)
		}
		count := func(n *int) {
			p.mu.Lock()
			*n++
			p.mu.Unlock()
		}
		if err := up.Send(first); err != nil {
			return upstreamErr(up, err)
		}
		count(&rs.st.Requests)
		// Requests: the app's half. Its end (EOF or a cancelled stream) closes ours; a
		// failed Send means the upstream stream ended, which its Recv below reports.
		go func() {
			for {
				req, err := down.Recv()
				if err != nil {
					_ = up.CloseSend()
					return
				}
				if err := up.Send(req); err != nil {
					return
				}
				count(&rs.st.Requests)
			}
		}()
		for {
			resp, err := up.Recv()
			if err != nil {
				// The request goroutine ends when this handler returns (grpc ends
				// down's Recv then); reqDone is buffered, so it never blocks.
				if errors.Is(err, io.EOF) || down.Context().Err() != nil {
					return nil // the server closed cleanly, or the app went away first
				}
				return err
			}
			if err := down.Send(resp); err != nil {
				return nil // the app went away
			}
			count(&rs.st.Responses)
		}
	}()
	p.mu.Lock()
	delete(p.streams, rs)
	if err != nil {
		p.lastErr, p.lastErrAt = fmt.Sprintf("node %s: %v", rs.st.Node, status.Convert(err).Message()), time.Now()
	}
	p.mu.Unlock()
	if err != nil {
		log.Warn("xds proxy: stream ended", "err", err)
		if _, ok := status.FromError(err); !ok {
			err = status.Error(codes.Unavailable, err.Error())
		}
		return err
	}
	log.Info("xds proxy: stream closed")
	return nil
}

// upstreamErr is the status the upstream stream ended with after Send failed.
func upstreamErr[Req, Resp any](up grpc.BidiStreamingClient[Req, Resp], sendErr error) error {
	if _, err := up.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return sendErr
}
