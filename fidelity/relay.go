package fidelity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
)

// relay is an ADS (state of the world) server that forwards a proxy's stream to istiod
// unchanged and records both directions: every resource istiod sent, by type and name,
// and every NACK the proxy answered with.
type relay struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	upstream string
	srv      *grpc.Server
	addr     string

	mu    sync.Mutex
	sent  map[string]map[string]*anypb.Any // type URL -> name -> latest resource
	nacks map[string][]string              // type URL -> error_detail messages
	acks  map[string]int                   // type URL -> ACKs seen
	// responses and answers count the responses forwarded and the ACKs or NACKs to them.
	responses, answers int
}

// startRelay serves ADS on the unix socket sock (reachable from the proxy's own network
// namespace) and forwards to istiod at upstream.
func startRelay(upstream, sock string) (*relay, error) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	r := &relay{
		upstream: upstream, srv: grpc.NewServer(), addr: ln.Addr().String(),
		sent: map[string]map[string]*anypb.Any{}, nacks: map[string][]string{}, acks: map[string]int{},
	}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(r.srv, r)
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *relay) stop() { r.srv.Stop() }

// StreamAggregatedResources forwards one proxy stream to istiod.
func (r *relay) StreamAggregatedResources(down discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	conn, err := grpc.NewClient(r.upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				errc <- err
				return
			}
			r.recordRequest(req)
			if err := up.Send(req); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		for {
			resp, err := up.Recv()
			if err != nil {
				errc <- err
				return
			}
			r.recordResponse(resp)
			if err := down.Send(resp); err != nil {
				errc <- err
				return
			}
		}
	}()
	err = <-errc
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

func (r *relay) recordRequest(req *discoveryv3.DiscoveryRequest) {
	if req.GetResponseNonce() == "" {
		return // a subscription, not an answer
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers++
	if d := req.GetErrorDetail(); d != nil {
		r.nacks[req.GetTypeUrl()] = append(r.nacks[req.GetTypeUrl()], d.GetMessage())
		return
	}
	r.acks[req.GetTypeUrl()]++
}

func (r *relay) recordResponse(resp *discoveryv3.DiscoveryResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.responses++
	typ := resp.GetTypeUrl()
	byName := r.sent[typ]
	if byName == nil || typ == listenerType || typ == clusterType {
		// LDS and CDS responses hold the whole set: the latest one is what was sent.
		byName = map[string]*anypb.Any{}
		r.sent[typ] = byName
	}
	for _, a := range resp.GetResources() {
		byName[resourceName(a)] = a
	}
}

// snapshot returns copies of what was sent and NACKed so far.
func (r *relay) snapshot() (sent map[string]map[string]*anypb.Any, nacks map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent = map[string]map[string]*anypb.Any{}
	for t, m := range r.sent {
		sent[t] = map[string]*anypb.Any{}
		for n, a := range m {
			sent[t][n] = a
		}
	}
	nacks = map[string][]string{}
	for t, l := range r.nacks {
		nacks[t] = append([]string(nil), l...)
	}
	return sent, nacks
}

// settled reports whether istiod sent listeners and clusters and every response it sent
// has been answered; n changes whenever anything was sent or answered.
func (r *relay) settled() (ok bool, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok = r.sent[listenerType] != nil && r.sent[clusterType] != nil && r.answers >= r.responses
	return ok, r.responses*1000003 + r.answers
}
