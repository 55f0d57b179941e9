// Package xdsclient is ztunnel's WDS client: one delta ADS stream (wildcard) for
// istio.workload.Address and istio.security.Authorization, authenticated with ztunnel's
// bearer token, every response ACKed or NACKed, reconnecting with the versions it holds
// as initial_resource_versions (ztunnel's src/xds/client.rs).
package xdsclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// Type URLs ztunnel subscribes to.
const (
	AddressType       = "type.googleapis.com/istio.workload.Address"
	AuthorizationType = "type.googleapis.com/istio.security.Authorization"
)

// Handler applies one response's changes of a type. It is called from the client's
// goroutine, one response at a time; an error NACKs the response (the handler must then
// have applied nothing of it).
type Handler interface {
	Apply(typeURL string, resources []*discoveryv3.Resource, removed []string) error
}

// Options configure a Client.
type Options struct {
	Conn      grpc.ClientConnInterface // required: to XDS_ADDRESS
	Node      *corev3.Node             // required
	TokenFile string                   // required: read for every stream ("authorization: Bearer")
	Handler   Handler                  // required
	Log       *slog.Logger             // required
	Types     []string                 // optional: default Address and Authorization
}

// Client keeps one delta ADS stream open. Its methods are safe for concurrent use.
type Client struct {
	opts Options

	mu       sync.Mutex
	versions map[string]map[string]string // type -> name -> version held
	synced   map[string]bool              // type -> first response applied
	syncedCh chan struct{}                // closed once every type has been applied once
}

// New makes a client; Run opens its stream.
func New(opts Options) *Client {
	if len(opts.Types) == 0 {
		opts.Types = []string{AddressType, AuthorizationType}
	}
	return &Client{opts: opts, versions: map[string]map[string]string{}, synced: map[string]bool{}, syncedCh: make(chan struct{})}
}

// Synced is closed once a response of every subscribed type has been applied.
func (c *Client) Synced() <-chan struct{} { return c.syncedCh }

// Run keeps a stream open until ctx ends (returning nil), reconnecting after a second
// when one fails.
func (c *Client) Run(ctx context.Context) error {
	for {
		err := c.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.opts.Log.Warn("xds stream ended; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (c *Client) stream(ctx context.Context) error {
	tok, err := os.ReadFile(c.opts.TokenFile)
	if err != nil {
		return fmt.Errorf("read token: %w", err)
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(tok))))
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.opts.Conn).DeltaAggregatedResources(ctx, grpc.MaxCallRecvMsgSize(200<<20))
	if err != nil {
		return fmt.Errorf("open delta ADS stream: %w", err)
	}
	for i, t := range c.opts.Types {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t, InitialResourceVersions: c.held(t)}
		if i == 0 {
			req.Node = c.opts.Node
		}
		if err := s.Send(req); err != nil {
			return fmt.Errorf("send %s subscription: %w", t, err)
		}
	}
	c.opts.Log.Info("xds stream open", "node", c.opts.Node.GetId())
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("server closed the stream")
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
		if err := c.apply(resp); err != nil {
			c.opts.Log.Warn("xds NACK", "type", resp.GetTypeUrl(), "nonce", resp.GetNonce(), "err", err)
			ack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		}
		if err := s.Send(ack); err != nil {
			return fmt.Errorf("send ack: %w", err)
		}
	}
}

// held returns the versions held of type t (the initial_resource_versions of a reconnect).
func (c *Client) held(t string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.versions[t] {
		out[k] = v
	}
	return out
}

func (c *Client) apply(resp *discoveryv3.DeltaDiscoveryResponse) error {
	t := resp.GetTypeUrl()
	for _, r := range resp.GetResources() {
		if r.GetResource() == nil {
			return fmt.Errorf("resource %q has no body", r.GetName())
		}
		if r.GetResource().GetTypeUrl() != t {
			return fmt.Errorf("resource %q is a %s in a %s response", r.GetName(), r.GetResource().GetTypeUrl(), t)
		}
	}
	if err := c.opts.Handler.Apply(t, resp.GetResources(), resp.GetRemovedResources()); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.versions[t]
	if v == nil {
		v = map[string]string{}
		c.versions[t] = v
	}
	for _, name := range resp.GetRemovedResources() {
		delete(v, name)
	}
	for _, r := range resp.GetResources() {
		v[r.GetName()] = r.GetVersion()
	}
	if !c.synced[t] {
		c.synced[t] = true
		all := true
		for _, typ := range c.opts.Types {
			all = all && c.synced[typ]
		}
		if all {
			close(c.syncedCh)
		}
	}
	return nil
}
