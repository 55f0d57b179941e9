package discovery

import (
	"context"
	"crypto/sha256"
	"maps"
	"slices"
	"sync"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// sharedCache answers SotW ADS watches from encoded resources shared across proxies
// and versions, as istiod's XDS cache does: each distinct resource is encoded once, when
// an update first generates it (the interner), and every response to every proxy
// carries that encoding, where go-control-plane's snapshot cache encodes every resource
// again for each response on each stream. Delta watches, and the snapshots' other
// uses, are the embedded snapshot cache's, which every snapshot is also set in.
//
// Its SotW behaviour is the snapshot cache's in ADS mode, with a version per type as
// istiod pushes only the types a change touches: a watch is answered at once when the
// proxy's snapshot has another version of the type than the request's (the version in
// which the type last changed), or names a subscribed resource the proxy was not sent
// yet; otherwise when a snapshot with another version of the type is set; answers to
// one proxy go out in type order (go-control-plane's
// GetResponseType: endpoints, clusters, routes, listeners). An RDS or EDS request naming
// a resource the snapshot lacks is not answered until a snapshot has it (Envoy asks only
// for what an LDS or CDS answer named). A named LDS or CDS request, as a proxyless gRPC
// client sends (it subscribes by name, never by wildcard), is answered as istiod answers
// it: with the named resources that exist, the others omitted, which an xDS client
// takes to mean they do not exist (answeredAbsent).
type sharedCache struct {
	cachev3.SnapshotCache

	mu     sync.Mutex
	nodes  map[string]*sotwNode
	nextID int64

	// answered, when set, is told of each request answered at once from the snapshot
	// (CreateWatch), before its answer is sent: the tracker's owe. Set once, before serving.
	answered func(req *cachev3.Request)

	// beforeDelta, when set, decides a delta watch before the snapshot cache does:
	// false drops the watch (it is never answered). Set once, before serving.
	beforeDelta func(node, typeURL string) bool
}

// CreateDeltaWatch is the snapshot cache's, after beforeDelta.
func (c *sharedCache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	if c.beforeDelta != nil && !c.beforeDelta(req.GetNode().GetId(), req.GetTypeUrl()) {
		return func() {}, nil
	}
	return c.SnapshotCache.CreateDeltaWatch(req, sub, ch)
}

// sotwNode is one proxy's current encoded snapshot and open SotW watches.
type sotwNode struct {
	snap *encodedSnapshot // nil until set
	// before holds, by type, the type's resources before their last change: a proxy
	// that ACKed them is sent only what changed since (partialTypes).
	before  map[resource.Type]encodedType
	watches map[int64]sotwWatch
}

type sotwWatch struct {
	req *cachev3.Request
	sub cachev3.Subscription
	ch  chan cachev3.Response
}

// encodedSnapshot is one version of a proxy's resources, encoded.
type encodedSnapshot struct {
	version string // the snapshot's, which a type it lacks is answered under
	types   map[resource.Type]encodedType
}

// typeVersion is the version of typ's resources in enc.
func (enc *encodedSnapshot) typeVersion(typ string) string {
	if et, ok := enc.types[typ]; ok {
		return et.version
	}
	return enc.version
}

// encodedType is one type's resources, sorted by name, and their encodings (shared,
// never modified), under the version in which they last changed.
type encodedType struct {
	version string
	names   []string
	anys    []*anypb.Any
	keys    [][sha256.Size]byte // each resource's digest
}

func newSharedCache(inner cachev3.SnapshotCache) *sharedCache {
	return &sharedCache{SnapshotCache: inner, nodes: map[string]*sotwNode{}}
}

// encode makes the encoded snapshot of a proxy state.
func encode(version string, st *proxyState) *encodedSnapshot {
	es := &encodedSnapshot{version: version, types: make(map[resource.Type]encodedType, len(st.types))}
	for typ, ts := range st.types {
		es.types[typ] = encodedType{version: ts.since, names: ts.names, anys: ts.anys, keys: ts.keys}
	}
	return es
}

// setSnapshot sets node's snapshot in the embedded cache (for delta watches) and its
// encoded form for SotW, answering the SotW watches it changes.
func (c *sharedCache) setSnapshot(ctx context.Context, node string, snap cachev3.ResourceSnapshot, enc *encodedSnapshot) error {
	//nolint:staticcheck // QF1008: names the embedded cache on purpose; sharedCache overrides other SnapshotCache methods
	if err := c.SnapshotCache.SetSnapshot(ctx, node, snap); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(node)
	if old := n.snap; old != nil {
		for typ, et := range enc.types {
			if was, ok := old.types[typ]; ok && was.version != et.version {
				n.before[typ] = was
			}
		}
	}
	n.snap = enc
	ids := slices.Collect(maps.Keys(n.watches))
	slices.SortFunc(ids, func(a, b int64) int {
		ta := cachev3.GetResponseType(n.watches[a].req.GetTypeUrl())
		tb := cachev3.GetResponseType(n.watches[b].req.GetTypeUrl())
		if ta != tb {
			return int(ta) - int(tb)
		}
		return int(a - b)
	})
	for _, id := range ids {
		w := n.watches[id]
		if w.req.GetVersionInfo() == enc.typeVersion(w.req.GetTypeUrl()) {
			continue // this type did not change
		}
		if resp := respond(w, enc, n.before[w.req.GetTypeUrl()]); resp != nil {
			delete(n.watches, id)
			select {
			case w.ch <- resp:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// ClearSnapshot forgets node's snapshots; its open watches stay until cancelled.
func (c *sharedCache) ClearSnapshot(node string) {
	c.SnapshotCache.ClearSnapshot(node)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.nodes[node]; ok {
		n.snap = nil
		if len(n.watches) == 0 {
			delete(c.nodes, node)
		}
	}
}

// node returns node's state, creating it. The caller holds c.mu.
func (c *sharedCache) node(id string) *sotwNode {
	n, ok := c.nodes[id]
	if !ok {
		n = &sotwNode{watches: map[int64]sotwWatch{}, before: map[resource.Type]encodedType{}}
		c.nodes[id] = n
	}
	return n
}

// CreateWatch answers req from node's snapshot, or waits for one that answers it.
func (c *sharedCache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	id := req.GetNode().GetId()
	w := sotwWatch{req: req, sub: sub, ch: ch}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(id)
	if enc := n.snap; enc != nil && (req.GetVersionInfo() != enc.typeVersion(req.GetTypeUrl()) || unsent(w, enc)) {
		if resp := respond(w, enc, n.before[w.req.GetTypeUrl()]); resp != nil {
			if c.answered != nil {
				c.answered(req)
			}
			ch <- resp // the stream's channel has room for one answer per type
			return func() {}, nil
		}
	}
	c.nextID++
	wid := c.nextID
	n.watches[wid] = w
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if n, ok := c.nodes[id]; ok {
			delete(n.watches, wid)
			if n.snap == nil && len(n.watches) == 0 {
				delete(c.nodes, id)
			}
		}
	}, nil
}

// unsent reports whether enc has a resource w subscribes to that the proxy was not sent.
// For a named LDS or CDS subscription, a name the proxy was not answered about at all
// (neither sent nor answered absent) counts too.
func unsent(w sotwWatch, enc *encodedSnapshot) bool {
	known := w.sub.ReturnedResources()
	typ := w.req.GetTypeUrl()
	et := enc.types[typ]
	if w.sub.IsWildcard() {
		for _, name := range et.names {
			if _, ok := known[name]; !ok {
				return true
			}
		}
		return false
	}
	for name := range w.sub.SubscribedResources() {
		if _, ok := known[name]; !ok {
			if _, found := slices.BinarySearch(et.names, name); found || answersAbsent(typ) {
				return true
			}
		}
	}
	return false
}

// answeredAbsent is the version recorded in a subscription's returned resources for a
// name a response omitted because the snapshot lacks it: the proxy was answered (so a
// request that only repeats the name is not answered again), and any later snapshot,
// having another version, answers it afresh.
const answeredAbsent = ""

// answersAbsent reports whether a request of type typ that names resources the snapshot
// lacks is answered without them (LDS and CDS, as istiod answers them), rather than
// held until a snapshot has them (RDS and EDS, as go-control-plane's ADS rule holds them).
func answersAbsent(typ string) bool {
	return typ == resource.ListenerType || typ == resource.ClusterType
}

// partialTypes are the types a SotW response may carry only some of, the others kept
// by the proxy as they were (the xDS protocol's rule for RDS and EDS, which istiod's
// incremental EDS push uses).
var partialTypes = []string{resource.EndpointType, resource.RouteType}

// respond builds the answer to w from enc: every resource of the type, or those the
// request names; for RDS and EDS nil when it names one enc lacks, for LDS and CDS
// without it (answersAbsent). For RDS and EDS, when the request ACKs before (the type
// before its last change), only the named resources that changed since, and those the
// proxy was not sent, as istiod's incremental EDS push (none when none did); when it
// ACKed this version and asks for more names, only the resources it was not sent.
func respond(w sotwWatch, enc *encodedSnapshot, before encodedType) cachev3.Response {
	typ := w.req.GetTypeUrl()
	et := enc.types[typ]
	version := enc.typeVersion(typ)
	out := &discoverypb.DiscoveryResponse{VersionInfo: version, TypeUrl: typ}
	returned := make(map[string]string, len(et.names))
	if names := w.req.GetResourceNames(); len(names) > 0 && !slices.Contains(names, "*") {
		// partial: the proxy ACKed the type's previous version, and has each resource it
		// was sent as it was then; current: it ACKed this version (and asks for more
		// names), and has each resource it was sent as it is.
		acked := slices.Contains(partialTypes, typ) && w.req.GetErrorDetail() == nil
		partial := acked && before.version != "" && w.req.GetVersionInfo() == before.version
		current := acked && w.req.GetVersionInfo() == version
		known := w.sub.ReturnedResources()
		for _, name := range names {
			i, ok := slices.BinarySearch(et.names, name)
			if !ok {
				if !answersAbsent(typ) {
					return nil
				}
				returned[name] = answeredAbsent
				continue
			}
			if _, dup := returned[name]; dup {
				continue
			}
			returned[name] = version
			if v, sent := known[name]; sent && current && v == version {
				continue // the proxy has it
			}
			if _, sent := known[name]; sent && partial {
				if j, ok := slices.BinarySearch(before.names, name); ok && before.keys[j] == et.keys[i] {
					continue // the proxy has it
				}
			}
			out.Resources = append(out.Resources, et.anys[i])
		}
		// When nothing it asks for changed (the type changed in resources it does not
		// subscribe to, as a new Service's load assignment before its cluster reaches
		// the proxy), the answer carries no resource: it moves the proxy to the version,
		// and Envoy updates no subscription a response has no resource for (its SotW
		// mux), where sending them all cost every proxy its whole EDS.
	} else {
		out.Resources = slices.Clone(et.anys)
		for _, name := range et.names {
			returned[name] = version
		}
	}
	return &cachev3.PassthroughResponse{Request: w.req, DiscoveryResponse: out, ReturnedResources: returned}
}
