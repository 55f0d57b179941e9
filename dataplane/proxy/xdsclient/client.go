// Package xdsclient is the proxy's ADS client: one StreamAggregatedResources stream
// (state of the world) or DeltaAggregatedResources stream (incremental, delta.go) that
// carries every resource type, with per-type version, nonce and subscribed names,
// ACK/NACK as Envoy sends them, and reconnection with backoff while the last applied
// configuration keeps serving.
//
// go-control-plane ships no client that can do this (one type per client, no named
// subscriptions), so this one speaks the protocol over the generated gRPC stub.
package xdsclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
)

// Type URLs of the resource types the proxy subscribes to, in the order Envoy sends
// their first requests.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	// WorkloadType is istio-proxy's metadata discovery (a waypoint's bootstrap
	// extension metadata_discovery): ambient's workloads, a wildcard subscription.
	WorkloadType = "type.googleapis.com/istio.workload.Workload"
)

var typeOrder = []string{ClusterType, EndpointType, ListenerType, RouteType, SecretType, WorkloadType}

// Handler applies the resources of one response.
//
// Apply is called from the client's stream goroutine, one response at a time. It must
// apply all of resources or none: a non-nil error NACKs the response (its text becomes
// error_detail.message) and the previous configuration must stay in force. Apply may call
// Client.Subscribe.
type Handler interface {
	Apply(typeURL, version string, resources []*anypb.Any) error
}

// Options configure a Client.
type Options struct {
	Conn                 grpc.ClientConnInterface // required: the connection to the xds cluster
	Node                 *corev3.Node             // required
	Handler              Handler                  // required
	Logger               *slog.Logger             // required
	NodeOnFirstMessage   bool                     // optional: set_node_on_first_message_only
	Wildcard             []string                 // optional: type URLs subscribed as wildcard (CDS, LDS)
	BackoffBase, Backoff time.Duration            // optional: reconnect backoff base and cap (500ms, 30s)
	OnConnected          func(bool)               // optional: told when a stream opens or fails
	// Delta selects the incremental protocol (DeltaAggregatedResources, ads_config
	// api_type DELTA_GRPC); optional, state of the world when false. Open is not used
	// then.
	Delta bool
	// Open opens the stream; optional, ADS's StreamAggregatedResources when nil (SDS
	// passes SecretDiscoveryService.StreamSecrets, whose protocol is the same).
	Open func(context.Context, grpc.ClientConnInterface) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error)
}

// Client is an ADS client. Create it with New and run it with Run.
type Client struct {
	opts Options
	kick chan struct{}

	mu    sync.Mutex
	types map[string]*typeState

	// received is set when the current stream delivers a response (Run's backoff reset).
	received atomic.Bool
}

type typeState struct {
	subscribed bool
	wildcard   bool
	names      []string
	version    string // last applied version
	nonce      string // last received nonce on the current stream
	dirty      bool   // names changed since the last request
	// Delta only: the resources held, the names the server was told, and whether the
	// type's first request went out on the current stream.
	resources map[string]deltaResource
	sent      []string
	opened    bool
}

// New returns a Client; it does nothing until Run.
func New(opts Options) *Client {
	if opts.BackoffBase == 0 {
		opts.BackoffBase = 500 * time.Millisecond
	}
	if opts.Backoff == 0 {
		opts.Backoff = 30 * time.Second
	}
	if opts.Conn != nil {
		opts.Conn = sizedConn{opts.Conn}
	}
	c := &Client{opts: opts, kick: make(chan struct{}, 1), types: map[string]*typeState{}}
	for _, t := range opts.Wildcard {
		c.types[t] = &typeState{subscribed: true, wildcard: true, dirty: true}
	}
	return c
}

// MaxMessageBytes is the largest xDS response the client receives: gRPC's default
// (4 MiB) is below what a large but valid config weighs in one state-of-the-world
// response. It is the meshlab control plane's own send limit (discovery.MaxMessageBytes),
// twice the size of the largest push it makes.
const MaxMessageBytes = 64 << 20

// sizedConn opens every stream with MaxMessageBytes as its receive limit.
type sizedConn struct{ grpc.ClientConnInterface }

func (c sizedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.ClientConnInterface.NewStream(ctx, desc, method, append(opts, grpc.MaxCallRecvMsgSize(MaxMessageBytes))...)
}

// Subscribe sets the resource names wanted for a named (non-wildcard) type such as EDS
// or RDS. A change is sent on the stream at once. Safe for concurrent use.
func (c *Client) Subscribe(typeURL string, names []string) {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	c.mu.Lock()
	st, ok := c.types[typeURL]
	if !ok {
		st = &typeState{}
		c.types[typeURL] = st
	}
	if st.subscribed && slices.Equal(st.names, names) {
		c.mu.Unlock()
		return
	}
	if !st.subscribed && len(names) == 0 {
		c.mu.Unlock()
		return
	}
	st.subscribed, st.names, st.dirty = true, names, true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Watch subscribes to every resource of typeURL (a wildcard subscription, as for CDS
// and LDS). Safe for concurrent use.
func (c *Client) Watch(typeURL string) {
	c.mu.Lock()
	st, ok := c.types[typeURL]
	if ok && st.wildcard {
		c.mu.Unlock()
		return
	}
	if !ok {
		st = &typeState{}
		c.types[typeURL] = st
	}
	st.subscribed, st.wildcard, st.names, st.dirty = true, true, nil, true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Names returns the names subscribed for typeURL.
func (c *Client) Names(typeURL string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.types[typeURL]; ok {
		return slices.Clone(st.names)
	}
	return nil
}

// Version returns the last applied version of typeURL.
func (c *Client) Version(typeURL string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.types[typeURL]; ok {
		return st.version
	}
	return ""
}

// Run keeps one ADS stream open, reconnecting with jittered exponential backoff, until ctx
// ends; it then returns nil.
//
// The backoff starts again from its base once a stream received a response, as Envoy's
// gRPC mux resets its backoff strategy on every message it receives: only streams that
// fail before the control plane answered make the next wait longer. Reset only when a
// stream outlived the cap, a proxy whose control plane restarted every few seconds (a
// lab's istiod, restarted by each install with a new trust domain and by `rollout
// restart`) waited longer at each restart, up to 30 s, and kept its old endpoints,
// answering 503 for a replaced pod, all that time.
func (c *Client) Run(ctx context.Context) error {
	delay := c.opts.BackoffBase
	for {
		c.received.Store(false)
		var err error
		if c.opts.Delta {
			err = c.deltaStream(ctx)
		} else {
			err = c.stream(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		c.connected(false)
		if c.received.Load() {
			delay = c.opts.BackoffBase
		}
		wait := time.Duration(rand.Int64N(int64(delay))) + delay/2
		c.opts.Logger.Warn(fmt.Sprintf("StreamAggregatedResources gRPC config stream to xds-grpc closed: %v", err), "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(delay*2, c.opts.Backoff)
	}
}

func (c *Client) connected(ok bool) {
	if c.opts.OnConnected != nil {
		c.opts.OnConnected(ok)
	}
}

func (c *Client) stream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	open := c.opts.Open
	if open == nil {
		open = func(ctx context.Context, conn grpc.ClientConnInterface) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
			return discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		}
	}
	s, err := open(ctx, c.opts.Conn)
	if err != nil {
		return fmt.Errorf("open ADS stream: %w", err)
	}
	c.mu.Lock()
	for _, st := range c.types {
		st.nonce = ""
		st.dirty = st.subscribed
	}
	c.mu.Unlock()
	sentNode := false
	send := func(req *discoveryv3.DiscoveryRequest) error {
		if !sentNode || !c.opts.NodeOnFirstMessage {
			req.Node = c.opts.Node
			sentNode = true
		}
		if err := s.Send(req); err != nil {
			return fmt.Errorf("send %s request: %w", req.GetTypeUrl(), err)
		}
		return nil
	}
	if err := c.flush(send); err != nil {
		return err
	}
	c.connected(true)
	return pump(ctx, cancel, c.kick, s.Recv, c.handle, send, func() error { return c.flush(send) })
}

// pump serves one ADS stream (state of the world or delta) once its first requests went
// out: a goroutine receives the responses, and the loop applies each (handle), sends
// what subscriptions it changed (flush), then its ACK or NACK; it also flushes when
// kicked, until ctx ends or the stream fails. cancel ends the receiving goroutine's
// stream; pump waits for the goroutine before it returns.
func pump[Resp, Req any](ctx context.Context, cancel context.CancelFunc, kick <-chan struct{},
	recvFn func() (Resp, error), handle func(Resp) Req, send func(Req) error, flush func() error,
) error {
	type result struct {
		resp Resp
		err  error
	}
	recv := make(chan result)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			resp, err := recvFn()
			select {
			case recv <- result{resp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-kick:
			if err := flush(); err != nil {
				return err
			}
		case r := <-recv:
			if r.err != nil {
				return fmt.Errorf("receive: %w", r.err)
			}
			// The subscriptions the response changed go out before its ACK, as Envoy's
			// mux sends them: a CDS update pauses EDS while it adds clusters and resumes it,
			// sending the new clusters' EDS request, before the CDS ACK is queued. A control
			// plane that reads the ACK knows by then that more is asked for, so "every
			// response ACKed" never holds while a new cluster waits for its endpoints.
			ack := handle(r.resp)
			if err := flush(); err != nil {
				return err
			}
			if err := send(ack); err != nil {
				return err
			}
		}
	}
}

// handle applies one response and returns its ACK or NACK.
func (c *Client) handle(resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	c.received.Store(true)
	typeURL := resp.GetTypeUrl()
	applyErr := c.validateTypes(resp)
	if applyErr == nil {
		applyErr = c.opts.Handler.Apply(typeURL, resp.GetVersionInfo(), resp.GetResources())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.types[typeURL]
	if !ok {
		st = &typeState{}
		c.types[typeURL] = st
	}
	st.nonce = resp.GetNonce()
	req := &discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResponseNonce: st.nonce, ResourceNames: c.requestNames(st)}
	if applyErr != nil {
		c.opts.Logger.Warn(fmt.Sprintf("gRPC config for %s rejected: %v", typeURL, applyErr), "version", resp.GetVersionInfo())
		req.VersionInfo = st.version
		req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: applyErr.Error()}
		return req
	}
	st.version = resp.GetVersionInfo()
	req.VersionInfo = st.version
	st.dirty = false // this request carries the current names
	return req
}

func (c *Client) validateTypes(resp *discoveryv3.DiscoveryResponse) error {
	for i, r := range resp.GetResources() {
		if r.GetTypeUrl() != resp.GetTypeUrl() {
			return fmt.Errorf("resources[%d]: type %s does not match the response type %s", i, r.GetTypeUrl(), resp.GetTypeUrl())
		}
	}
	if !slices.Contains(typeOrder, resp.GetTypeUrl()) {
		return errors.New("unsupported resource type " + resp.GetTypeUrl())
	}
	return nil
}

func (c *Client) requestNames(st *typeState) []string {
	if st.wildcard {
		return nil
	}
	return slices.Clone(st.names)
}

// flush sends a request for every type whose subscription changed, in Envoy's order.
func (c *Client) flush(send func(*discoveryv3.DiscoveryRequest) error) error {
	var reqs []*discoveryv3.DiscoveryRequest
	c.mu.Lock()
	for _, t := range typeOrder {
		st, ok := c.types[t]
		if !ok || !st.dirty {
			continue
		}
		st.dirty = false
		reqs = append(reqs, &discoveryv3.DiscoveryRequest{
			TypeUrl: t, VersionInfo: st.version, ResponseNonce: st.nonce, ResourceNames: c.requestNames(st),
		})
	}
	c.mu.Unlock()
	for _, r := range reqs {
		if err := send(r); err != nil {
			return err
		}
	}
	return nil
}
