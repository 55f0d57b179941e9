package peer

import (
	"net/http"

	"google.golang.org/protobuf/types/known/structpb"
)

// HTTPState is one request's peer metadata state in the peer_metadata filter.
type HTTPState struct {
	// Downstream and Upstream are the discovered peers, nil when none.
	Downstream, Upstream *Workload
	// reqID and reqMeta report whether the request carried the headers: the downstream
	// propagation answers only what it was sent.
	reqID, reqMeta bool
}

// OnRequest runs downstream discovery on the request headers and removes the exchange
// headers, as the filter's decodeHeaders.
func (f *HTTPFilter) OnRequest(h http.Header, st *HTTPState) {
	if !f.DownstreamHeaders {
		return
	}
	id, meta := h.Get(HeaderMetadataID), h.Get(HeaderMetadata)
	st.reqID, st.reqMeta = id != "", meta != ""
	if meta != "" {
		if w, ok := ParseHeader(meta, f.Labels); ok {
			st.Downstream = w
		}
	}
	h.Del(HeaderMetadataID)
	h.Del(HeaderMetadata)
}

// InjectUpstream adds the local node's metadata to an upstream request unless the
// cluster is external (skip_external_clusters: PassthroughCluster, or istio metadata
// external: true) or opted out (istio metadata disable_mx: true).
func (f *HTTPFilter) InjectUpstream(h http.Header, cluster string, istioMeta *structpb.Struct) {
	if !f.PropagateUpstream || f.skip(cluster, istioMeta) {
		return
	}
	n := Local()
	h.Set(HeaderMetadataID, n.ID)
	h.Set(HeaderMetadata, n.Header)
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

// OnResponse runs upstream discovery on the response headers (removing the exchange
// headers) and then downstream propagation: the local metadata is added to the response
// only when the request carried the matching header.
func (f *HTTPFilter) OnResponse(h http.Header, st *HTTPState) {
	if f.UpstreamHeaders {
		if meta := h.Get(HeaderMetadata); meta != "" {
			if w, ok := ParseHeader(meta, f.Labels); ok {
				st.Upstream = w
			}
		}
		h.Del(HeaderMetadataID)
		h.Del(HeaderMetadata)
	}
	if f.PropagateDownstream {
		n := Local()
		if st.reqID {
			h.Set(HeaderMetadataID, n.ID)
		}
		if st.reqMeta {
			h.Set(HeaderMetadata, n.Header)
		}
	}
}
