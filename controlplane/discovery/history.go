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

// history keeps the newest snapshots of each proxy in a bounded ring. Every method is
// safe for concurrent use.
type history struct {
	size  int
	now   func() time.Time
	mu    sync.Mutex
	nodes map[string][]*Snapshot // oldest first, at most size
}

func newHistory(size int, now func() time.Time) *history {
	if size <= 0 {
		size = DefaultHistorySize
	}
	return &history{size: size, now: now, nodes: map[string][]*Snapshot{}}
}

// add records a snapshot set for node, dropping the oldest beyond the bound.
func (h *history) add(node, version, trigger string, res map[resource.Type][]types.Resource) {
	snap := &Snapshot{Version: version, Time: h.now(), Trigger: trigger, Types: map[string]SnapshotType{}, res: res}
	for typ, rs := range res {
		snap.Types[typ] = SnapshotType{Resources: len(rs)}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	list := append(h.nodes[node], snap)
	if len(list) > h.size {
		list = append([]*Snapshot(nil), list[len(list)-h.size:]...)
	}
	h.nodes[node] = list
}

// forget drops the history of nodes no longer in the mesh.
func (h *history) forget(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.nodes, id)
	}
}

// observe records ACKs and NACKs on the snapshot of the version they name.
func (h *history) observe(e Event) {
	if e.Kind != EventACK && e.Kind != EventNACK {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, snap := range h.nodes[e.NodeID] {
		if snap.Version != e.Version {
			continue
		}
		st, ok := snap.Types[e.TypeURL]
		if !ok {
			return
		}
		if e.Kind == EventNACK {
			st.State, st.Error = "NACK", e.Error
		} else if st.State == "" {
			st.State = "ACK"
		}
		snap.Types[e.TypeURL] = st
		return
	}
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
