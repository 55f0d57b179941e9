package discovery

import (
	"sync"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// DefaultHistorySize is how many snapshots the server keeps per proxy unless
// Options.HistorySize says otherwise.
const DefaultHistorySize = 20

// DefaultHistoryBytes bounds the history's resources (their encoded size) unless
// Options.HistoryBytes says otherwise.
const DefaultHistoryBytes = 64 << 20

// Snapshot is one config version the server set for one proxy, as `meshlab history`
// shows it.
type Snapshot struct {
	// Version is the snapshot's version ("v3").
	Version string `json:"version"`
	// Time is when the server set it.
	Time time.Time `json:"time"`
	// Trigger says what made it: "start", "apply: VirtualService default/reviews", a fault.
	Trigger string `json:"trigger"`
	// Types holds, by type URL, how many resources of the type the snapshot has and
	// whether the proxy ACKed or NACKed the version.
	Types map[string]SnapshotType `json:"types"`

	res map[resource.Type][]types.Resource
	// costs is, by type, the encoded bytes of the resources this snapshot holds that no
	// older snapshot kept did: what dropping it frees, once no newer snapshot shares them.
	costs map[resource.Type]int
	// since is, by type URL, the version in which the type's resources last changed:
	// the version the proxy is sent and ACKs for it (sotwcache.go).
	since map[string]string
	seq   uint64
}

// SnapshotType is the state of one resource type of a Snapshot on its proxy.
type SnapshotType struct {
	// Resources is the number of resources of the type.
	Resources int `json:"resources"`
	// State is "ACK", "NACK", or "" when the proxy has not answered this version.
	State string `json:"state,omitempty"`
	// Error is the proxy's error for a NACK.
	Error string `json:"error,omitempty"`
}

// history keeps the newest snapshots of each proxy in a bounded ring, within a bound
// in bytes across proxies. Snapshots share resources (a proxy's unchanged types, and
// resources identical across proxies), so it holds no full copy per proxy per version.
// Every method is safe for concurrent use.
type history struct {
	size     int
	maxBytes int
	now      func() time.Time
	mu       sync.Mutex
	nodes    map[string][]*Snapshot // oldest first, at most size
	bytes    int                    // sum of the kept snapshots' costs
	seq      uint64
	order    []histRef // every kept snapshot once, oldest first (with stale refs)
	// early holds, by node and type URL, the last ACK or NACK that named a version no
	// snapshot had yet: the relay adds istiod's push to the history once its types are
	// in (relayFlush), and a quick proxy answers before that. add applies it.
	early map[string]map[string]Event
}

// histRef names one snapshot in the history's order.
type histRef struct {
	node string
	seq  uint64
}

func newHistory(size, maxBytes int, now func() time.Time) *history {
	if size <= 0 {
		size = DefaultHistorySize
	}
	if maxBytes <= 0 {
		maxBytes = DefaultHistoryBytes
	}
	return &history{size: size, maxBytes: maxBytes, now: now, nodes: map[string][]*Snapshot{}, early: map[string]map[string]Event{}}
}

// add records a snapshot set for node; costs is, by type, the encoded bytes of the
// resources it was the first to hold, and since the version in which each type last
// changed (nil: version). A type it keeps from an older snapshot keeps that one's ACK
// or NACK. It then drops node's oldest beyond the ring's size and the oldest snapshots
// of any proxy beyond the bound in bytes.
func (h *history) add(node, version, trigger string, res map[resource.Type][]types.Resource, costs map[resource.Type]int, since map[string]string) {
	snap := &Snapshot{Version: version, Time: h.now(), Trigger: trigger, Types: map[string]SnapshotType{}, res: res, costs: costs, since: since}
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.nodes[node]
	for typ, rs := range res {
		st := SnapshotType{Resources: len(rs)}
		if v := snap.sinceOf(typ); v != version {
			for i := len(list) - 1; i >= 0; i-- {
				if list[i].sinceOf(typ) == v {
					st.State, st.Error = list[i].Types[typ].State, list[i].Types[typ].Error
					break
				}
			}
		}
		if e, ok := h.early[node][typ]; ok && e.Version == snap.sinceOf(typ) {
			st.State, st.Error = answerState(e)
			delete(h.early[node], typ)
		}
		snap.Types[typ] = st
	}
	h.seq++
	snap.seq = h.seq
	h.nodes[node] = append(h.nodes[node], snap)
	h.order = append(h.order, histRef{node, snap.seq})
	for _, c := range costs {
		h.bytes += c
	}
	for len(h.nodes[node]) > h.size {
		h.dropOldest(node)
	}
	h.enforceBytes()
}

// enforceBytes drops the oldest snapshots while the history is over its bound in bytes,
// keeping each proxy's current one. The caller holds h.mu.
func (h *history) enforceBytes() {
	var keep []histRef // current snapshots met on the way: they stay in the order
	for h.bytes > h.maxBytes && len(h.order) > 0 {
		ref := h.order[0]
		h.order = h.order[1:]
		list := h.nodes[ref.node]
		if len(list) == 0 || list[0].seq != ref.seq {
			continue // dropped already
		}
		if len(list) == 1 {
			keep = append(keep, ref)
			continue
		}
		h.dropOldest(ref.node)
	}
	if keep != nil {
		h.order = append(keep, h.order...)
	}
	if len(h.order) > 64 && cap(h.order) > 4*len(h.order) {
		h.order = append([]histRef(nil), h.order...) // let the dropped refs go
	}
}

// dropOldest drops node's oldest snapshot; the costs of the types its next snapshot
// shares move to that one. The caller holds h.mu.
func (h *history) dropOldest(node string) {
	list := h.nodes[node]
	old := list[0]
	var next *Snapshot
	if len(list) > 1 {
		next = list[1]
	}
	for typ, c := range old.costs {
		if next != nil && sameSlice(old.res[typ], next.res[typ]) {
			if next.costs == nil {
				next.costs = map[resource.Type]int{}
			}
			next.costs[typ] += c
			continue
		}
		h.bytes -= c
	}
	list[0] = nil
	h.nodes[node] = list[1:]
}

// sameSlice reports whether a and b are the same slice (not only equal contents).
func sameSlice(a, b []types.Resource) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// forget drops the history of nodes no longer in the mesh.
func (h *history) forget(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		for len(h.nodes[id]) > 0 {
			h.dropOldest(id)
		}
		delete(h.nodes, id)
		delete(h.early, id)
	}
}

// sinceOf is the version in which the snapshot's typ last changed.
func (s *Snapshot) sinceOf(typ string) string {
	if v, ok := s.since[typ]; ok {
		return v
	}
	return s.Version
}

// observe records ACKs and NACKs on the snapshots whose version of the type is the
// one they name.
func (h *history) observe(e Event) {
	if e.Kind != EventACK && e.Kind != EventNACK {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The snapshots that have the type at that version are one run of the list (a
	// type's version only moves forward, oldest first), usually the newest: walk back
	// from the newest and stop where the run ends.
	list := h.nodes[e.NodeID]
	matched := false
	for i := len(list) - 1; i >= 0; i-- {
		snap := list[i]
		st, ok := snap.Types[e.TypeURL]
		if !ok {
			continue
		}
		if snap.sinceOf(e.TypeURL) != e.Version {
			if matched {
				break
			}
			continue
		}
		matched = true
		if e.Kind == EventNACK || st.State == "" {
			st.State, st.Error = answerState(e)
		}
		snap.Types[e.TypeURL] = st
	}
	if !matched {
		if h.early[e.NodeID] == nil {
			h.early[e.NodeID] = map[string]Event{}
		}
		h.early[e.NodeID][e.TypeURL] = e
	}
}

// answerState is a snapshot type's State and Error after the proxy's answer e.
func answerState(e Event) (state, errText string) {
	if e.Kind == EventNACK {
		return "NACK", e.Error
	}
	return "ACK", ""
}

// list returns copies of node's snapshots, oldest first.
func (h *history) list(node string) []Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Snapshot, 0, len(h.nodes[node]))
	for _, s := range h.nodes[node] {
		c := *s
		c.Types = make(map[string]SnapshotType, len(s.Types))
		for k, v := range s.Types {
			c.Types[k] = v
		}
		out = append(out, c)
	}
	return out
}

// find returns node's snapshot of version, or nil.
func (h *history) find(node, version string) *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.nodes[node] {
		if s.Version == version {
			return s
		}
	}
	return nil
}

// versions returns the versions of node's snapshots, oldest first.
func (h *history) versions(node string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, s := range h.nodes[node] {
		out = append(out, s.Version)
	}
	return out
}

// History returns the snapshots the server keeps of the proxy with node id node, oldest
// first (none for an unknown node).
func (s *Server) History(node string) []Snapshot { return s.history.list(node) }
