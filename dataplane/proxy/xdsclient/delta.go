package xdsclient

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
)

// deltaResource is one resource the client holds under the incremental protocol.
type deltaResource struct {
	version string
	body    *anypb.Any
}

// deltaStream runs one DeltaAggregatedResources stream (ads_config api_type DELTA_GRPC),
// as Envoy's NewGrpcMuxImpl: the first request of a type names what it wants
// (resource_names_subscribe; none for a wildcard type) and what it already holds
// (initial_resource_versions, after a reconnect); responses carry only changed resources
// and removed names; every response is ACKed or NACKed by its nonce; a changed
// subscription sends only the names added and removed. The Handler still sees each
// type's whole state, as with state of the world, so it applies all or nothing.
func (c *Client) deltaStream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.opts.Conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("open delta ADS stream: %w", err)
	}
	c.mu.Lock()
	for _, st := range c.types {
		st.sent = nil // the new stream knows no subscription yet
		st.opened = false
		st.dirty = st.subscribed
	}
	c.mu.Unlock()
	sentNode := false
	send := func(req *discoveryv3.DeltaDiscoveryRequest) error {
		if !sentNode || !c.opts.NodeOnFirstMessage {
			req.Node = c.opts.Node
			sentNode = true
		}
		if err := s.Send(req); err != nil {
			return fmt.Errorf("send %s delta request: %w", req.GetTypeUrl(), err)
		}
		return nil
	}
	if err := c.deltaFlush(send); err != nil {
		return err
	}
	c.connected(true)
	return pump(ctx, cancel, c.kick, s.Recv, c.deltaHandle, send, func() error { return c.deltaFlush(send) })
}

// deltaHandle applies one incremental response to a copy of its type's resources and
// returns the ACK, or the NACK that leaves them as they were.
func (c *Client) deltaHandle(resp *discoveryv3.DeltaDiscoveryResponse) *discoveryv3.DeltaDiscoveryRequest {
	c.received.Store(true)
	typeURL := resp.GetTypeUrl()
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResponseNonce: resp.GetNonce()}
	c.mu.Lock()
	st, ok := c.types[typeURL]
	if !ok {
		st = &typeState{}
		c.types[typeURL] = st
	}
	next := maps.Clone(st.resources)
	c.mu.Unlock()
	if next == nil {
		next = map[string]deltaResource{}
	}
	err := c.validateDelta(resp)
	if err == nil {
		for _, r := range resp.GetResources() {
			if r.GetResource() == nil {
				continue // a name the server only reports (no body): nothing to apply
			}
			next[r.GetName()] = deltaResource{version: r.GetVersion(), body: r.GetResource()}
		}
		for _, name := range resp.GetRemovedResources() {
			delete(next, name)
		}
		names := slices.Sorted(maps.Keys(next))
		all := make([]*anypb.Any, 0, len(names))
		for _, n := range names {
			all = append(all, next[n].body)
		}
		err = c.opts.Handler.Apply(typeURL, resp.GetSystemVersionInfo(), all)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.opts.Logger.Warn(fmt.Sprintf("delta config for %s rejected: %v", typeURL, err), "version", resp.GetSystemVersionInfo())
		ack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		return ack
	}
	st.resources = next
	st.version = resp.GetSystemVersionInfo()
	return ack
}

func (c *Client) validateDelta(resp *discoveryv3.DeltaDiscoveryResponse) error {
	if !slices.Contains(typeOrder, resp.GetTypeUrl()) {
		return fmt.Errorf("unsupported resource type %s", resp.GetTypeUrl())
	}
	for i, r := range resp.GetResources() {
		if r.GetName() == "" {
			return fmt.Errorf("resources[%d].name: required", i)
		}
		if b := r.GetResource(); b != nil && b.GetTypeUrl() != resp.GetTypeUrl() {
			return fmt.Errorf("resources[%d]: type %s does not match the response type %s", i, b.GetTypeUrl(), resp.GetTypeUrl())
		}
	}
	return nil
}

// deltaFlush sends, in Envoy's type order, the first request of every subscribed type
// not yet opened on this stream and a subscribe/unsubscribe request for every named
// type whose names changed.
func (c *Client) deltaFlush(send func(*discoveryv3.DeltaDiscoveryRequest) error) error {
	var reqs []*discoveryv3.DeltaDiscoveryRequest
	c.mu.Lock()
	for _, t := range typeOrder {
		st, ok := c.types[t]
		if !ok || !st.dirty {
			continue
		}
		st.dirty = false
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t}
		if !st.opened {
			st.opened = true
			if len(st.resources) > 0 {
				req.InitialResourceVersions = map[string]string{}
				for name, r := range st.resources {
					if st.wildcard || slices.Contains(st.names, name) {
						req.InitialResourceVersions[name] = r.version
					}
				}
			}
		}
		if !st.wildcard {
			req.ResourceNamesSubscribe = minus(st.names, st.sent)
			req.ResourceNamesUnsubscribe = minus(st.sent, st.names)
			for _, gone := range req.ResourceNamesUnsubscribe {
				delete(st.resources, gone) // Envoy forgets what it no longer watches
			}
			st.sent = slices.Clone(st.names)
			if len(req.ResourceNamesSubscribe) == 0 && len(req.ResourceNamesUnsubscribe) == 0 && req.InitialResourceVersions == nil {
				// Nothing changed for the server; and a named type's request without names
				// would read as a wildcard subscription.
				continue
			}
		}
		reqs = append(reqs, req)
	}
	c.mu.Unlock()
	for _, r := range reqs {
		if err := send(r); err != nil {
			return err
		}
	}
	return nil
}

// minus returns the names of a not in b, sorted.
func minus(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
