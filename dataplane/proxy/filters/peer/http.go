package peer

import (
	"net/http"
	"net/netip"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"
)

// HTTPState is one request's peer metadata state in the peer_metadata filter.
type HTTPState struct {
	// Downstream and Upstream are the discovered peers, nil when none.
	Downstream, Upstream *Workload
	// DownstreamRaw and UpstreamRaw are the headers the peers came from, as received
	// (the exchange encoding of a peer found by metadata discovery).
	DownstreamRaw, UpstreamRaw string
	// reqID and reqMeta report whether the request carried the headers: the downstream
	// propagation answers only what it was sent.
	reqID, reqMeta bool
}

// OnRequest runs downstream discovery on the request (its headers, then the metadata
// discovery index at the downstream remote address remote, in the configured order) and
// removes the exchange headers, as the filter's decodeHeaders.
func (f *HTTPFilter) OnRequest(h http.Header, st *HTTPState, remote netip.Addr) {
	if f.DownstreamHeaders {
		st.reqID, st.reqMeta = h.Get(HeaderMetadataID) != "", h.Get(HeaderMetadata) != ""
	}
	if w, raw := f.discoverFirst(f.Downstream, f.DownstreamHeaders, h, remote); w != nil {
		st.Downstream, st.DownstreamRaw = w, raw
	}
}

// discoverFirst runs the discovery methods ms in order until one finds a peer, then
// removes the exchange headers from h when istio_headers is among them (headers).
func (f *HTTPFilter) discoverFirst(ms []Method, headers bool, h http.Header, addr netip.Addr) (w *Workload, raw string) {
	for _, m := range ms {
		if w, raw = f.discover(m, h, addr); w != nil {
			break
		}
	}
	if headers {
		h.Del(HeaderMetadataID)
		h.Del(HeaderMetadata)
	}
	return w, raw
}

// discover runs one discovery method: the peer and, for a peer from headers, the header
// it came from.
func (f *HTTPFilter) discover(m Method, h http.Header, addr netip.Addr) (*Workload, string) {
	switch m {
	case MethodHeaders:
		if meta := h.Get(HeaderMetadata); meta != "" {
			if w, ok := parseCached(meta, f.Labels); ok {
				return w, meta
			}
		}
	case MethodWorkload:
		if w := Discover(addr); w != nil {
			return w, w.state
		}
	}
	return nil, ""
}

// InjectUpstream adds the local node's metadata to an upstream request unless the
// cluster is external (skip_external_clusters: PassthroughCluster, or istio metadata
// external: true) or opted out (istio metadata disable_mx: true).
func (f *HTTPFilter) InjectUpstream(h http.Header, cluster string, istioMeta *structpb.Struct) {
	if !f.PropagateUpstream || f.skip(cluster, istioMeta) {
		return
	}
	n := Local()
	setShared(h, canonicalID, n.idValues)
	setShared(h, canonicalMetadata, n.headerValues)
}

// The exchange headers' canonical keys.
var (
	canonicalID       = http.CanonicalHeaderKey(HeaderMetadataID)
	canonicalMetadata = http.CanonicalHeaderKey(HeaderMetadata)
)

// setShared sets a header to values made once and shared by every request (the local
// node's metadata, 1 KB of it): Header.Set would allocate a one-element slice per
// request. vs has len == cap, so an append by a later filter copies it, and nothing on
// the proxy's path writes a header's values in place.
func setShared(h http.Header, canonicalKey string, vs []string) {
	h[canonicalKey] = vs
}

func (f *HTTPFilter) skip(cluster string, istioMeta *structpb.Struct) bool {
	if f.SkipExternal && cluster == "PassthroughCluster" {
		return true
	}
	fields := istioMeta.GetFields()
	if f.SkipExternal && fields["external"].GetBoolValue() {
		return true
	}
	return fields["disable_mx"].GetBoolValue()
}

// OnResponse runs upstream discovery on the response (its headers, then the metadata
// discovery index at the upstream host's address upstream, in the configured order),
// removing the exchange headers, and then downstream propagation: the local metadata is
// added to the response only when the request carried the matching header.
func (f *HTTPFilter) OnResponse(h http.Header, st *HTTPState, upstream netip.Addr) {
	// The first peer found stays (a retried request's next response finds it again).
	if w, raw := f.discoverFirst(f.Upstream, f.UpstreamHeaders, h, upstream); w != nil && st.Upstream == nil {
		st.Upstream, st.UpstreamRaw = w, raw
	}
	if f.PropagateDownstream {
		n := Local()
		if st.reqID {
			setShared(h, canonicalID, n.idValues)
		}
		if st.reqMeta {
			setShared(h, canonicalMetadata, n.headerValues)
		}
	}
}

// headerCache holds parsed x-envoy-peer-metadata values, as istio-proxy caches peers
// by id: a sidecar sees few distinct peers, and parsing is a base64 decode and a
// protobuf unmarshal per request otherwise. Bounded: it is emptied when it reaches
// maxCachedPeers. A plain map under a read lock (a sync.Map boxed the ~1 KB key into an
// interface on every lookup).
var (
	headerMu    sync.RWMutex
	headerCache = map[string]*Workload{}
)

const maxCachedPeers = 1024

// parseCached is ParseHeader with the cache; a cached Workload is shared, so callers
// never modify it.
func parseCached(v string, extra []string) (*Workload, bool) {
	if len(extra) > 0 {
		return ParseHeader(v, extra)
	}
	headerMu.RLock()
	w, ok := headerCache[v]
	headerMu.RUnlock()
	if ok {
		return w, true
	}
	w, ok = ParseHeader(v, nil)
	if !ok {
		return nil, false
	}
	headerMu.Lock()
	if len(headerCache) >= maxCachedPeers {
		clear(headerCache)
	}
	headerCache[v] = w
	headerMu.Unlock()
	return w, true
}
