package discovery

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
)

// ProxyStatus is what the server knows of one proxy, as `meshlab proxy-status` shows it.
type ProxyStatus struct {
	// NodeID is the proxy's xDS node id (model.Pod.NodeID).
	NodeID string
	// Connected reports whether the proxy has an open ADS stream.
	Connected bool
	// Delta reports whether its latest stream speaks delta xDS (DELTA_GRPC), where a
	// type is pushed only when its resources change (delta.go).
	Delta bool
	// Types holds the state of each type URL the proxy has requested.
	Types map[string]TypeStatus
	// PushError is why the last update could not generate the proxy's config ("" when it
	// could): the proxy keeps the config it had, as Types shows.
	PushError string
}

// TypeStatus is the state of one resource type on one proxy. The proxy runs the latest
// config of the type when Sent equals Acked; NackError and LastNack record the last
// rejection and stay after later ACKs, as history.
type TypeStatus struct {
	// Want is the version of the proxy's current snapshot: what it will be sent. Until the
	// push goes out (just after an update, or while a fault holds it) Sent lags behind it.
	Want string
	// Sent is the version of the last response sent.
	Sent string
	// Acked is the version the proxy last reported as applied.
	Acked string
	// Nonce is the nonce of the last response sent.
	Nonce string
	// NackError is the proxy's error_detail message of its last NACK ("" if none).
	NackError string
	// LastNack is when the last NACK arrived (zero if none).
	LastNack time.Time
	// LastAck is when the last ACK arrived (zero if none): with a push's start, how long
	// the proxy took to apply it.
	LastAck time.Time
}

// Synced reports whether the proxy has applied the last version sent.
func (t TypeStatus) Synced() bool {
	return t.Sent != "" && t.Sent == t.Acked && (t.Want == "" || sentCovers(t.Sent, t.Want))
}

// sentCovers reports whether a response of version sent carries the resources of
// version want, the version in which a type's resources last changed: the same
// version, or a later one of this server's ("v<n>"), whose snapshot has the same
// resources. A delta response is stamped with its snapshot's version (go-control-plane's
// system_version_info), so a proxy that subscribes after an update that changed only
// other types of its snapshot (a waypoint's endpoints, once its pods are redirected to
// ztunnel) is sent its unchanged clusters as of that later version. Versions that are
// not the server's (istiod's, relayed) must be equal.
func sentCovers(sent, want string) bool {
	if sent == want {
		return true
	}
	s, okS := serverVersion(sent)
	w, okW := serverVersion(want)
	return okS && okW && s >= w
}

// serverVersion parses a version this server gives its snapshots ("v<n>", update.go).
func serverVersion(v string) (uint64, bool) {
	n, ok := strings.CutPrefix(v, "v")
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(n, 10, 64)
	return u, err == nil
}

// nodeState is the tracker's record of one node id, across its streams.
type nodeState struct {
	streams int
	delta   bool // its latest stream is a delta one
	types   map[string]TypeStatus
	// gone: the node left the mesh while its proxy was still connected (a removed pod
	// draining); its state goes when its last stream closes.
	gone bool
}

// streamState is what the tracker knows of one ADS stream.
type streamState struct {
	node  string
	sent  map[string]sentResponse // by type URL: the last response sent on this stream
	delta bool
	// last holds, by type URL, the last SotW request received, and owed the types the
	// cache answered a request of at once with a response not sent yet (owe): a proxy
	// that asked for more names (EDS after a CDS update added clusters) is not synced
	// until it has them, though every response it was sent is ACKed.
	last map[string]*discoverypb.DiscoveryRequest
	owed map[string]bool
}

// sentResponse identifies one response sent, and whether the proxy answered it on the
// stream: answered is set by its ACK or NACK (nack holds the NACK's message).
type sentResponse struct {
	version, nonce string
	answered       bool
	nack           string
}

// tracker observes ADS streams through go-control-plane's callbacks, which it calls
// synchronously from stream goroutines; every method is safe for concurrent use.
type tracker struct {
	log     *slog.Logger
	now     func() time.Time
	observe func(Event) // optional
	// beforeSend, when set, runs before each response is written, outside the lock, with
	// the stream's context: the faults' delays and holds (faults.go).
	beforeSend func(ctx context.Context, node string)

	mu      sync.Mutex
	streams map[int64]*streamState    // node id learned from the first request
	ctxs    map[int64]context.Context // stream contexts, from OnStreamOpen
	nodes   map[string]*nodeState
	changed chan struct{} // closed by the next event (emit), then nil; made by changes
}

func newTrackerObserved(log *slog.Logger, now func() time.Time, observe func(Event)) *tracker {
	t := newTracker(log, now)
	t.observe = observe
	return t
}

func newTracker(log *slog.Logger, now func() time.Time) *tracker {
	return &tracker{
		log: log, now: now, streams: map[int64]*streamState{}, nodes: map[string]*nodeState{},
		ctxs: map[int64]context.Context{},
	}
}

// callbacks returns the go-control-plane callbacks feeding the tracker.
func (t *tracker) callbacks() serverv3.Callbacks {
	return serverv3.CallbackFuncs{
		StreamOpenFunc:     t.onOpen,
		StreamRequestFunc:  t.onRequest,
		StreamResponseFunc: t.onResponse,
		StreamClosedFunc:   t.onClosed,

		DeltaStreamOpenFunc:     t.onDeltaOpen,
		StreamDeltaRequestFunc:  t.onDeltaRequest,
		StreamDeltaResponseFunc: t.onDeltaResponse,
		DeltaStreamClosedFunc:   t.onDeltaClosed,
	}
}

// node returns the state of id, creating it. The caller holds t.mu.
func (t *tracker) node(id string) *nodeState {
	n, ok := t.nodes[id]
	if !ok {
		n = &nodeState{types: map[string]TypeStatus{}}
		t.nodes[id] = n
	}
	return n
}

// onRequest records the stream's node on its first request, then every ACK (a request
// answering a response nonce without error_detail) and NACK (with error_detail). The
// request's version_info is the last version the proxy applied, in both cases.
//
// A NACK also has its version_info rewritten to the version it rejects, before
// go-control-plane sees it: the snapshot cache answers any request whose version differs
// from the snapshot's at once, so it would resend the rejected config, the proxy would
// reject it again, and so on in a tight loop. Rewritten, the request waits, as Istio's
// do, for the next config version.
func (t *tracker) onRequest(streamID int64, req *discoverypb.DiscoveryRequest) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.streams[streamID]
	if !ok {
		id := req.GetNode().GetId()
		if id == "" {
			return nil // go-control-plane refuses such streams itself
		}
		st = &streamState{node: id, sent: map[string]sentResponse{}, last: map[string]*discoverypb.DiscoveryRequest{}, owed: map[string]bool{}}
		t.streams[streamID] = st
		t.node(id).streams++
		t.node(id).delta = false
		t.log.Info("proxy connected", "node", id, "stream", streamID)
		t.emit(Event{Kind: EventConnected, NodeID: id})
	}
	id := st.node
	// A newer request of the type supersedes an answer still queued: go-control-plane
	// drops that answer (its watch is closed) and answers this one afresh, or not.
	st.last[req.GetTypeUrl()] = req
	delete(st.owed, req.GetTypeUrl())
	n := t.node(id)
	ts := n.types[req.GetTypeUrl()]
	if req.GetResponseNonce() != "" {
		ts.Acked = req.GetVersionInfo()
		if sent := st.sent[req.GetTypeUrl()]; sent.nonce == req.GetResponseNonce() {
			sent.answered, sent.nack = true, req.GetErrorDetail().GetMessage()
			st.sent[req.GetTypeUrl()] = sent
		}
		if detail := req.GetErrorDetail(); detail != nil {
			ts.NackError = detail.GetMessage()
			ts.LastNack = t.now()
			t.log.Warn("proxy rejected config", "node", id, "type", req.GetTypeUrl(),
				"nonce", req.GetResponseNonce(), "applied", req.GetVersionInfo(), "error", detail.GetMessage())
			rejected := ""
			if sent := st.sent[req.GetTypeUrl()]; sent.nonce == req.GetResponseNonce() {
				req.VersionInfo = sent.version
				rejected = sent.version
			}
			t.emit(Event{Kind: EventNACK, NodeID: id, TypeURL: req.GetTypeUrl(), Version: rejected, Error: detail.GetMessage()})
		} else {
			t.log.Debug("proxy acked config", "node", id, "type", req.GetTypeUrl(), "version", req.GetVersionInfo())
			ts.LastAck = t.now()
			t.emit(Event{Kind: EventACK, NodeID: id, TypeURL: req.GetTypeUrl(), Version: req.GetVersionInfo()})
		}
	}
	n.types[req.GetTypeUrl()] = ts
	return nil
}

// onOpen remembers the stream's context, which ends when the stream does.
func (t *tracker) onOpen(ctx context.Context, streamID int64, _ string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctxs[streamID] = ctx
	return nil
}

// onResponse records the version and nonce of a response about to be sent, then runs
// beforeSend: a held push is recorded as sent (the proxy is STALE) but waits here.
func (t *tracker) onResponse(_ context.Context, streamID int64, req *discoverypb.DiscoveryRequest, resp *discoverypb.DiscoveryResponse) {
	node, ctx := t.recordResponse(streamID, req, resp)
	if node != "" && t.beforeSend != nil && ctx != nil {
		t.beforeSend(ctx, node)
	}
}

// recordResponse records a response about to be sent and returns its node id ("" when
// the stream is unknown) and the stream's context.
func (t *tracker) recordResponse(streamID int64, req *discoverypb.DiscoveryRequest, resp *discoverypb.DiscoveryResponse) (string, context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.streams[streamID]
	if !ok {
		return "", nil
	}
	id := st.node
	st.sent[resp.GetTypeUrl()] = sentResponse{version: resp.GetVersionInfo(), nonce: resp.GetNonce()}
	delete(st.owed, resp.GetTypeUrl())
	n := t.node(id)
	ts := n.types[resp.GetTypeUrl()]
	ts.Sent, ts.Nonce = resp.GetVersionInfo(), resp.GetNonce()
	n.types[resp.GetTypeUrl()] = ts
	t.log.Debug("config pushed", "node", id, "type", resp.GetTypeUrl(), "version", ts.Sent,
		"resources", len(resp.GetResources()), "requested", req.GetResourceNames())
	t.emit(Event{Kind: EventPushed, NodeID: id, TypeURL: resp.GetTypeUrl(), Version: ts.Sent})
	return id, t.ctxs[streamID]
}

// owe records that the cache answered req, the request a stream's onRequest saw last of
// its type, with a response that is not sent yet: until recordResponse sees it go, the
// stream is not synced. Without it a waiter could take the ACK of a CDS update for
// sync while the proxy's EDS request for the clusters it added was answered but its
// answer still queued, and a check's first request would meet a cluster with no
// endpoints (the hello lab's 503 after a DestinationRule added subsets).
func (t *tracker) owe(req *discoverypb.DiscoveryRequest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range t.streams {
		if st.last[req.GetTypeUrl()] == req {
			st.owed[req.GetTypeUrl()] = true // no waiter to wake: nothing became synced
			return
		}
	}
}

// onClosed forgets the stream; the node's type states stay, as its last known state.
func (t *tracker) onClosed(streamID int64, _ *core.Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ctxs, streamID)
	st, ok := t.streams[streamID]
	if !ok {
		return
	}
	delete(t.streams, streamID)
	n := t.node(st.node)
	n.streams--
	if n.gone && n.streams == 0 {
		delete(t.nodes, st.node)
	}
	t.log.Info("proxy disconnected", "node", st.node, "stream", streamID)
	t.emit(Event{Kind: EventDisconnected, NodeID: st.node})
}

// forget drops the state of nodes no longer in the mesh: now for those with no open
// stream, when their last stream closes for the others.
func (t *tracker) forget(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if n, ok := t.nodes[id]; ok {
			if n.streams == 0 {
				delete(t.nodes, id)
			} else {
				n.gone = true
			}
		}
	}
}

// status returns the state of every node in known or seen on a stream, sorted by node
// id; known nodes that never connected appear with no types.
func (t *tracker) status(known []string) []ProxyStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := map[string]bool{}
	for _, id := range known {
		ids[id] = true
	}
	for id := range t.nodes {
		ids[id] = true
	}
	out := make([]ProxyStatus, 0, len(ids))
	for id := range ids {
		ps := ProxyStatus{NodeID: id, Types: map[string]TypeStatus{}}
		if n, ok := t.nodes[id]; ok {
			ps.Connected = n.streams > 0
			ps.Delta = n.delta
			ps.Types = maps.Clone(n.types)
		}
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// Unsynced returns the node id of the first open stream, of a proxy include accepts, that
// does not run the config it was sent, and why ("", "" when every one does). A stream is synced when, for every
// type it was sent, the proxy answered the last response with an ACK (a NACK is named
// with its error) and nothing newer is pending for it: the type's Want (the version the
// server is to send, Status) is the version sent, or unknown. Only open streams count: a
// closed stream's types (a proxyless app's call that ended, while the pod's agent keeps
// a stream of its own) are neither ACKed nor pending, and its proxy gets the current
// config when it opens another. A proxy with no open stream is include's to judge.
func (s *Server) Unsynced(include func(node string) bool) (node, why string) {
	want := map[string]map[string]string{}
	for _, ps := range s.Status() {
		w := map[string]string{}
		for typ, ts := range ps.Types {
			w[typ] = ts.Want
		}
		want[ps.NodeID] = w
	}
	return s.tracker.unsynced(include, func(node, typ string) string { return want[node][typ] })
}

// Synced reports whether Unsynced would name no node. It is the check a waiter repeats
// on every change of the streams (SyncChanges), so it builds no status and stops at the
// first unanswered or rejected response; Unsynced says why.
func (s *Server) Synced(include func(node string) bool) bool {
	sent, ok := s.tracker.answered(include)
	if !ok {
		return false
	}
	_, ztSince := s.ztunnelNodes()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range sent {
		if w := s.wantLocked(r.node, r.typ, ztSince); w != "" && !sentCovers(r.version, w) {
			return false
		}
	}
	return true
}

// SyncChanges returns a channel closed at the next change of what Synced reads of the
// streams: a stream opened or closed, a response sent, ACKed or NACKed. An update
// changes what is to be sent too, and the responses it causes are such changes.
func (s *Server) SyncChanges() <-chan struct{} { return s.tracker.changes() }

// Disconnected returns the first node, in node id order, that include accepts and has
// no open stream, of those Status lists but ztunnels ("" when every one is connected).
func (s *Server) Disconnected(include func(node string) bool) string {
	s.mu.Lock()
	known := s.nodes // replaced by each update, never modified
	s.mu.Unlock()
	return s.tracker.disconnected(known, include)
}

// disconnected is Disconnected over known and the nodes seen on a stream.
func (t *tracker) disconnected(known []string, include func(node string) bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := ""
	check := func(id string) {
		if (first == "" || id < first) && include(id) {
			if n := t.nodes[id]; n == nil || n.streams == 0 {
				first = id
			}
		}
	}
	for _, id := range known {
		check(id)
	}
	for id, n := range t.nodes {
		if n.streams == 0 {
			check(id)
		}
	}
	return first
}

// changes returns a channel closed by the next event.
func (t *tracker) changes() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// sentVersion is the version of a type last sent on a stream of a node.
type sentVersion struct{ node, typ, version string }

// answered returns the version last sent of each type on each open stream include
// accepts, or ok false when one of those responses is not answered yet or was rejected.
func (t *tracker) answered(include func(node string) bool) (sent []sentVersion, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range t.streams {
		if include != nil && !include(st.node) {
			continue
		}
		if len(st.owed) > 0 {
			return nil, false
		}
		for typ, r := range st.sent {
			if !r.answered || r.nack != "" {
				return nil, false
			}
			sent = append(sent, sentVersion{st.node, typ, r.version})
		}
	}
	return sent, true
}

// unsynced is Unsynced over the tracker's open streams, in node id order.
func (t *tracker) unsynced(include func(node string) bool, want func(node, typ string) string) (node, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := slices.Collect(maps.Keys(t.streams))
	slices.SortFunc(ids, func(a, b int64) int {
		if c := strings.Compare(t.streams[a].node, t.streams[b].node); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, id := range ids {
		st := t.streams[id]
		if include != nil && !include(st.node) {
			continue
		}
		if typ, ok := firstKey(st.owed); ok {
			return st.node, fmt.Sprintf("is yet to be sent the %s it asked for", typ[strings.LastIndex(typ, ".")+1:])
		}
		for _, typ := range slices.Sorted(maps.Keys(st.sent)) {
			sent, short := st.sent[typ], typ[strings.LastIndex(typ, ".")+1:]
			switch w := want(st.node, typ); {
			case !sent.answered:
				return st.node, fmt.Sprintf("has not answered %s %s yet", short, sent.version)
			case sent.nack != "":
				return st.node, fmt.Sprintf("rejected %s %s: %s", short, sent.version, sent.nack)
			case w != "" && !sentCovers(sent.version, w):
				return st.node, fmt.Sprintf("is to be sent %s %s (sent %s)", short, w, sent.version)
			}
		}
	}
	return "", ""
}

// firstKey returns m's least key, false when m is empty.
func firstKey(m map[string]bool) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	return slices.Min(slices.Collect(maps.Keys(m))), true
}
