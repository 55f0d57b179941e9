package httpconn

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/rbac"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// applyRBAC runs one envoy.filters.http.rbac: its shadow rules (dry-run policies) are
// evaluated and reported only; a request its rules deny gets Envoy's 403 local reply
// "RBAC: access denied" with response code details
// rbac_access_denied_matched_policy[...]. http.<stat_prefix>.rbac.* count the
// decisions, the results go to the request's dynamic metadata under
// envoy.filters.http.rbac (where the access log reads them), and the rbac logger tells
// each at debug.
func (rt *router) applyRBAC(x *exchange, cfg *rbac.HTTPConfig) (int, bool) {
	r := x.r
	in := &rbac.Input{
		Local: rt.ds.Local, DirectRemote: rt.ds.Remote, Remote: rt.ds.Remote,
		TLS:             r.TLS != nil,
		ServerName:      rt.ds.ServerName,
		Header:          requestHeader(r),
		Headers:         func() [][2]string { return requestHeaders(r) },
		DynamicMetadata: x.meta,
		FilterState:     internalconn.Values(x.filterState(rt.ds.FilterState)),
	}
	if x.remote.IsValid() {
		in.Remote = x.remote // remote_ip follows x-forwarded-for, direct_remote_ip the peer
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		in.Peer = r.TLS.PeerCertificates[0]
	}
	res := cfg.HTTPStats(rt.st.scope).Check(&cfg.Rules, in, rt.rbacLogger())
	if res.Metadata != nil {
		if x.meta == nil {
			x.meta = map[string]*structpb.Struct{}
		}
		res.MergeInto(x.meta, rbac.HTTPFilterName)
		x.info.DynamicMetadata = x.meta
	}
	if res.Allowed {
		return 0, false
	}
	x.info.CodeDetails = rbac.ResponseDetail(res.Policy)
	return rt.localReply(x, http.StatusForbidden, rbac.DeniedBody), true
}

// rbacLogger returns the connection's rbac logger, made once.
func (rt *router) rbacLogger() *slog.Logger {
	if l := rt.rbacLog.Load(); l != nil {
		return l
	}
	if rt.deps.Logger == nil {
		return nil
	}
	l := rt.deps.Logger.With("component", rbac.LoggerName)
	rt.rbacLog.Store(l)
	return l
}

// requestHeaders lists a request's headers as Envoy's header map holds them: the pseudo
// headers, then the others with repeated values joined by ",".
func requestHeaders(r *http.Request) [][2]string {
	get := requestHeader(r)
	var out [][2]string
	for _, n := range []string{":authority", ":path", ":method", ":scheme"} {
		if v, ok := get(n); ok {
			out = append(out, [2]string{n, v})
		}
	}
	names := make([]string, 0, len(r.Header))
	for n := range r.Header {
		names = append(names, strings.ToLower(n))
	}
	slices.Sort(names)
	for _, n := range names {
		v, _ := get(n)
		out = append(out, [2]string{n, v})
	}
	return out
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
