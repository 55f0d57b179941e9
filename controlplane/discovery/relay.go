package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// The relay serves ADS on the lab's sockets with another control plane's config: with
// Options.Upstream set (istiod, `up --control-plane=istiod`), every proxy stream the lab
// authenticated is forwarded unchanged to the upstream server and its answers back, both
// SotW and delta. The tracker sees both directions as it sees go-control-plane's, so
// Status (proxy-status), events, faults' holds and delays keep working; the history
// records what the upstream sent, one snapshot per push version (a push's types arrive as
// separate responses of one version), so History and Diff read istiod's config. The
// model is not generated: Update only remembers it.

// relayStreamBase keeps the relay's stream ids apart from go-control-plane's.
const relayStreamBase = int64(1) << 40

// relayFlush is how long a push's snapshot waits for the push's other types before it
// enters the history.
const relayFlush = 200 * time.Millisecond

type relay struct {
	discoverypb.UnimplementedAggregatedDiscoveryServiceServer
	s    *Server
	conn *grpc.ClientConn
	ids  atomic.Int64

	mu    sync.Mutex
	nodes map[string]*relayNode
}

// relayNode is what the upstream last sent one node, by type and name, and the push
// version not yet in the history.
type relayNode struct {
	res     map[resource.Type]map[string]types.Resource
	since   map[string]string
	pending string // version of a push not yet recorded ("" when none)
	timer   *time.Timer
}

// relayRedial is how often the relay redials an upstream that is gone (a local socket:
// istiod restarting, lab/istiodcp).
const relayRedial = 200 * time.Millisecond

// newRelay dials upstream (a gRPC target, e.g. unix:///run/meshlab/lab/istiod-xds.sock);
// the connection is made on first use and kept. While the upstream is away (istiod
// restarts when the lab turns ambient) a proxy's new stream waits for it rather than
// failing, so the proxies, whose streams ended with the old istiod, reconnect once and
// are served as soon as the new one listens, not after their growing backoff.
func newRelay(s *Server, upstream string) (*relay, error) {
	conn, err := grpc.NewClient(upstream, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: relayRedial, Multiplier: 1, MaxDelay: relayRedial},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxRequestBytes)))
	if err != nil {
		return nil, fmt.Errorf("relay to %s: %w", upstream, err)
	}
	return &relay{s: s, conn: conn, nodes: map[string]*relayNode{}}, nil
}

func (r *relay) close() error { return r.conn.Close() }

// StreamAggregatedResources relays one SotW stream.
func (r *relay) StreamAggregatedResources(down discoverypb.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	id := relayStreamBase + r.ids.Add(1)
	t := r.s.tracker
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	defer context.AfterFunc(r.s.ctx, cancel)()
	_ = t.onOpen(ctx, id, "")
	defer t.onClosed(id, nil)
	up, err := discoverypb.NewAggregatedDiscoveryServiceClient(r.conn).StreamAggregatedResources(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "control plane: %v", err)
	}
	var last proto.Message = &discoverypb.DiscoveryRequest{}
	var lastMu sync.Mutex
	return pump(ctx,
		func() error {
			req, err := down.Recv()
			if err != nil {
				return err
			}
			if err := t.onRequest(id, proto.Clone(req).(*discoverypb.DiscoveryRequest)); err != nil {
				return err
			}
			lastMu.Lock()
			last = req
			lastMu.Unlock()
			return up.Send(req)
		},
		func() error {
			resp, err := up.Recv()
			if err != nil {
				return err
			}
			lastMu.Lock()
			req := last.(*discoverypb.DiscoveryRequest)
			lastMu.Unlock()
			t.onResponse(ctx, id, req, resp)
			if node := r.nodeOf(id); node != "" {
				r.record(node, resp.GetTypeUrl(), resp.GetVersionInfo(), resp.GetResources(), nil, nil, true)
			}
			return down.Send(resp)
		})
}

// DeltaAggregatedResources relays one delta stream.
func (r *relay) DeltaAggregatedResources(down discoverypb.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	id := relayStreamBase + r.ids.Add(1)
	t := r.s.tracker
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	defer context.AfterFunc(r.s.ctx, cancel)()
	_ = t.onDeltaOpen(ctx, id, "")
	defer t.onDeltaClosed(id, nil)
	up, err := discoverypb.NewAggregatedDiscoveryServiceClient(r.conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "control plane: %v", err)
	}
	return pump(ctx,
		func() error {
			req, err := down.Recv()
			if err != nil {
				return err
			}
			if err := t.onDeltaRequest(id, req); err != nil {
				return err
			}
			return up.Send(req)
		},
		func() error {
			resp, err := up.Recv()
			if err != nil {
				return err
			}
			t.onDeltaResponse(id, &discoverypb.DeltaDiscoveryRequest{}, resp)
			if node := r.nodeOf(deltaKey(id)); node != "" {
				anys := make([]*anypb.Any, 0, len(resp.GetResources()))
				names := make([]string, 0, len(resp.GetResources()))
				for _, res := range resp.GetResources() {
					anys, names = append(anys, res.GetResource()), append(names, res.GetName())
				}
				r.record(node, resp.GetTypeUrl(), resp.GetSystemVersionInfo(), anys, names, resp.GetRemovedResources(), false)
			}
			return down.Send(resp)
		})
}

// pump runs recv-and-forward loops in both directions until one ends; a clean end of
// either side ends the stream without error.
func pump(ctx context.Context, downToUp, upToDown func() error) error {
	errc := make(chan error, 2)
	for _, loop := range []func() error{downToUp, upToDown} {
		go func() {
			for {
				if err := loop(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	err := <-errc
	if errors.Is(err, io.EOF) || ctx.Err() != nil || status.Code(err) == codes.Canceled {
		return nil
	}
	return err
}

// nodeOf returns the node id of a tracked stream ("" before its first request).
func (r *relay) nodeOf(streamID int64) string {
	t := r.s.tracker
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.streams[streamID]; st != nil {
		return st.node
	}
	return ""
}

// record merges what the upstream sent node into its latest state: a SotW LDS or CDS
// response holds the whole type (replace), other responses add or replace by name, a
// delta response also removes. A delta resource is keyed by the name it was sent with
// (names, parallel to anys): a WDS Address has no name field of its own. The push
// enters the history once its types are in.
func (r *relay) record(node, typ, version string, anys []*anypb.Any, names, removed []string, sotw bool) {
	msgs := make([]types.Resource, 0, len(anys))
	keys := make([]string, 0, len(anys))
	for i, a := range anys {
		m, err := a.UnmarshalNew()
		if err != nil {
			continue
		}
		key := nameOfResource(m)
		if i < len(names) && names[i] != "" {
			key = names[i]
		}
		msgs, keys = append(msgs, m), append(keys, key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[node]
	if n == nil {
		n = &relayNode{res: map[resource.Type]map[string]types.Resource{}, since: map[string]string{}}
		r.nodes[node] = n
	}
	if n.pending != "" && n.pending != version {
		r.flushLocked(node, n)
	}
	byName := n.res[typ]
	if byName == nil || (sotw && (typ == resource.ListenerType || typ == resource.ClusterType)) {
		byName = map[string]types.Resource{}
		n.res[typ] = byName
	}
	for i, m := range msgs {
		byName[keys[i]] = m
	}
	for _, name := range removed {
		delete(byName, name)
	}
	n.since[typ] = version
	n.pending = version
	if n.timer != nil {
		n.timer.Stop()
	}
	n.timer = time.AfterFunc(relayFlush, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n.pending == version {
			r.flushLocked(node, n)
		}
	})
}

// flushLocked adds node's pending push to the history. The caller holds r.mu.
func (r *relay) flushLocked(node string, n *relayNode) {
	res, costs, since := n.contents()
	r.s.history.add(node, n.pending, "istiod push", res, costs, since)
	n.pending = ""
}

// pendingSnapshot is node's push that still waits for its other types (relayFlush) before
// it enters the history, as a snapshot outside the history; nil when there is none. A
// diff asked for right after istiod pushed (the proxy may have ACKed it already) reads it
// rather than the older snapshot the history keeps, or none.
func (r *relay) pendingSnapshot(node string) *Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[node]
	if n == nil || n.pending == "" {
		return nil
	}
	res, _, since := n.contents()
	return &Snapshot{Version: n.pending, Trigger: "istiod push", res: res, since: since}
}

// contents are the node's resources by type as a snapshot holds them, their encoded
// sizes and the version each type last changed in. The caller holds the relay's mu.
func (n *relayNode) contents() (map[resource.Type][]types.Resource, map[resource.Type]int, map[string]string) {
	res := map[resource.Type][]types.Resource{}
	costs := map[resource.Type]int{}
	for typ, byName := range n.res {
		for _, m := range byName {
			res[typ] = append(res[typ], m)
			costs[typ] += proto.Size(m)
		}
	}
	since := map[string]string{}
	for k, v := range n.since {
		since[k] = v
	}
	return res, costs, since
}

// nameOfResource is an xDS resource's name as the history and Diff key it.
func nameOfResource(m types.Resource) string {
	type named interface{ GetName() string }
	type clusterNamed interface{ GetClusterName() string }
	switch x := m.(type) {
	case clusterNamed:
		return x.GetClusterName()
	case named:
		return x.GetName()
	}
	return ""
}

// GeneratorVersion is how DiffGenerated names meshlab's generator's config.
const GeneratorVersion = "meshlab"

// ErrNoUpstream is returned by DiffGenerated when the server generates the config itself
// (there is no other control plane's config to compare it with).
var ErrNoUpstream = errors.New("the lab's control plane is meshlab's generator: there is no istiod config to compare it with (up --control-plane=istiod)")

// DiffGenerated compares what the upstream control plane (istiod) sent the proxy with
// node id node, at version ("" for the latest the history keeps), with what meshlab's own
// generator (controlplane/xds) makes for the same pod from the model the lab last gave
// Update: where meshlab's generator and istiod differ on the running lab. Only the types
// the upstream sent are compared (certificates stay the agents' SDS either way).
func (s *Server) DiffGenerated(node, version string) (SnapshotDiff, error) {
	if s.relay == nil {
		return SnapshotDiff{}, ErrNoUpstream
	}
	s.mu.Lock()
	m := s.model
	s.mu.Unlock()
	var snap *Snapshot
	switch p := s.relay.pendingSnapshot(node); {
	case p != nil && (version == "" || version == p.Version):
		snap = p
	case version == "":
		if kept := s.history.list(node); len(kept) > 0 {
			snap = &kept[len(kept)-1]
		}
	default:
		snap = s.history.find(node, version)
	}
	if snap == nil {
		return SnapshotDiff{}, fmt.Errorf("diff %s: %w %q (kept: %s)", node, ErrUnknownVersion, version,
			strings.Join(s.history.versions(node), ", "))
	}
	var pod *model.Pod
	if m != nil {
		for _, p := range m.Pods {
			if p.NodeID() == node {
				pod = p
				break
			}
		}
	}
	if pod == nil {
		return SnapshotDiff{}, fmt.Errorf("diff %s: no pod of the lab has this node id", node)
	}
	gen, err := xds.Generate(m, pod)
	if err != nil {
		return SnapshotDiff{}, fmt.Errorf("meshlab's generator: %w", err)
	}
	ours := make(map[resource.Type][]types.Resource, len(snap.res))
	for typ := range snap.res {
		ours[typ] = gen[typ]
	}
	return diffResources(node, snap.Version, GeneratorVersion, snap.res, ours)
}
