package peer

import (
	"cmp"
	"net/netip"
	"sync/atomic"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// WorkloadType is the type URL of the workloads istio-proxy's metadata_discovery
// bootstrap extension subscribes to over ADS (a waypoint's bootstrap has it): the
// workload_discovery method of the peer filters looks peers up among them by address.
const WorkloadType = "type.googleapis.com/istio.workload.Workload"

// Filter state keys of the discovered peers (istio-proxy's DownstreamPeer and
// UpstreamPeer): the peer_metadata filter sets them, istio.stats reads them.
const (
	KeyDownstreamPeer = "downstream_peer"
	KeyUpstreamPeer   = "upstream_peer"
)

// Workloads is the metadata discovery's index: the workloads of the last WDS update by
// each of their addresses. Immutable once made.
type Workloads struct {
	byAddr map[netip.Addr]*Workload
}

var discovered atomic.Pointer[Workloads]

// NewWorkloads indexes WDS workloads by address, as istio-proxy's metadata discovery
// converts them: the pod's name, namespace ("default" when elided), cluster,
// workload name, canonical service and revision (also its app and version, which WDS
// does not carry), and its SPIFFE identity (trust domain "cluster.local" and service
// account "default" when elided). A workload without an IP address is not indexed.
func NewWorkloads(ws []*workload.Workload) *Workloads {
	idx := &Workloads{byAddr: make(map[netip.Addr]*Workload, len(ws))}
	for _, w := range ws {
		ns := cmp.Or(w.GetNamespace(), "default")
		p := &Workload{
			Name: w.GetName(), Namespace: ns, Cluster: w.GetClusterId(), WorkloadName: w.GetWorkloadName(),
			CanonicalName: w.GetCanonicalName(), CanonicalRevision: w.GetCanonicalRevision(),
			App: w.GetCanonicalName(), Version: w.GetCanonicalRevision(),
			Identity: "spiffe://" + cmp.Or(w.GetTrustDomain(), "cluster.local") + "/ns/" + ns + "/sa/" + cmp.Or(w.GetServiceAccount(), "default"),
		}
		p.state = p.HeaderValue()
		for _, b := range w.GetAddresses() {
			if a, ok := netip.AddrFromSlice(b); ok {
				idx.byAddr[a.Unmap()] = p
			}
		}
	}
	return idx
}

// Len is the number of indexed addresses (Envoy's workload_discovery.total gauge).
func (w *Workloads) Len() int { return len(w.byAddr) }

// SetWorkloads replaces the process's metadata discovery index (nil: none).
func SetWorkloads(w *Workloads) { discovered.Store(w) }

// Discover returns the workload at addr in the metadata discovery index, nil when the
// index has none there (or there is no index: a sidecar's, which never subscribes).
// A returned Workload is shared and never modified.
func Discover(addr netip.Addr) *Workload {
	idx := discovered.Load()
	if idx == nil || !addr.IsValid() {
		return nil
	}
	return idx.byAddr[addr.Unmap()]
}

// WithState returns fs with the peer w (found from header raw, "" for one found by
// metadata discovery) as the filter state object key, shared once with the upstream
// connection when shared, as the filter's setFilterState: an object already under key
// stays (the first discovery wins), and fs itself is never modified.
func WithState(fs map[string]internalconn.Object, key string, w *Workload, raw string, shared bool) map[string]internalconn.Object {
	if _, ok := fs[key]; ok {
		return fs
	}
	out := make(map[string]internalconn.Object, len(fs)+1)
	for k, o := range fs {
		out[k] = o
	}
	o := internalconn.Object{Value: raw, Data: w}
	if o.Value == "" {
		o.Value = w.state
	}
	if shared {
		o.Sharing = internalconn.SharedOnce
	}
	out[key] = o
	return out
}

// FromState returns the peer under key in fs, nil for none.
func FromState(fs map[string]internalconn.Object, key string) *Workload {
	w, _ := fs[key].Data.(*Workload)
	return w
}
