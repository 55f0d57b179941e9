package httpconn

import (
	"net/http"
	"strings"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/rbac"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// applyRBAC runs one envoy.filters.http.rbac: a denied request gets Envoy's 403 local
// reply "RBAC: access denied" with response code details
// rbac_access_denied_matched_policy[...]; http.<stat_prefix>.rbac.allowed/denied count
// the decisions.
func (rt *router) applyRBAC(x *exchange, cfg *rbac.HTTPConfig) (int, bool) {
	r := x.r
	in := &rbac.Input{
		Local: rt.ds.Local, DirectRemote: rt.ds.Remote, Remote: rt.ds.Remote,
		TLS:             r.TLS != nil,
		Header:          requestHeader(r),
		DynamicMetadata: x.meta,
		FilterState:     internalconn.Values(x.filterState(rt.ds.FilterState)),
	}
	if x.remote.IsValid() {
		in.Remote = x.remote // remote_ip follows x-forwarded-for, direct_remote_ip the peer
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		in.Peer = r.TLS.PeerCertificates[0]
	}
	ok, policy := cfg.HTTPStats(rt.st.scope).Check(cfg.Engine, in)
	if ok {
		return 0, false
	}
	x.info.CodeDetails = rbac.ResponseDetail(policy)
	return rt.localReply(x, http.StatusForbidden, rbac.DeniedBody), true
}

// requestHeader returns the request's headers as Envoy's header map has them: pseudo
// headers :method, :path, :authority and :scheme, and repeated values joined by ",".
func requestHeader(r *http.Request) func(string) (string, bool) {
	return func(name string) (string, bool) {
		switch name {
		case ":method":
			return r.Method, true
		case ":path":
			return requestPath(r), true
		case ":authority", "host":
			return r.Host, r.Host != ""
		case ":scheme":
			if r.TLS != nil {
				return "https", true
			}
			return "http", true
		}
		vs := r.Header.Values(name)
		if len(vs) == 0 {
			return "", false
		}
		return strings.Join(vs, ","), true
	}
}
