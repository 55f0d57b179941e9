// Package rbac is the proxy's role based access control: Envoy's config.rbac.v3.RBAC
// engine (ALLOW and DENY policies of permissions and principals) and the two filters that
// run it, envoy.filters.http.rbac (a denied request gets 403 "RBAC: access denied") and
// envoy.filters.network.rbac (a denied connection is closed), with Envoy's
// <prefix>rbac.allowed / rbac.denied stats. Their shadow rules (istiod's dry-run
// policies) are evaluated beside the enforced ones and only reported: stats
// rbac.<shadow prefix>.shadow_allowed / shadow_denied, dynamic metadata and the rbac
// logger's debug lines.
package rbac

import (
	"crypto/x509"
	"net/netip"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Action is a policy set's action, with Envoy's enum values.
type Action int

// Actions. LOG is not implemented.
const (
	ActionAllow Action = 0
	ActionDeny  Action = 1
)

// Input is what matchers look at: the connection and, for HTTP, the request.
type Input struct {
	Local        netip.AddrPort // destination (the restored original destination)
	DirectRemote netip.AddrPort // the peer of the downstream connection
	Remote       netip.AddrPort // the downstream remote address (the peer: no trusted hops)
	// Peer is the downstream client certificate of a TLS connection; nil without one.
	Peer *x509.Certificate
	// TLS reports whether the downstream connection is TLS (authenticated needs it).
	TLS bool
	// ServerName is the downstream TLS SNI ("" without).
	ServerName string
	// Header returns a request header (pseudo headers ":method", ":path",
	// ":authority") as Envoy joins repeated values, and whether it is present; nil on
	// a network filter, where no header is present.
	Header func(name string) (string, bool)
	// Headers lists the request's headers, pseudo headers first, for the rbac debug log;
	// nil on a network filter. Called only when that log is on.
	Headers func() [][2]string
	// DynamicMetadata is the request's dynamic metadata by filter name (the JWT
	// filter's payload under "envoy.filters.http.jwt_authn"); nil on a network filter.
	DynamicMetadata map[string]*structpb.Struct
	// FilterState are the stream's (or connection's) filter state objects in their
	// string form (a waypoint's io.istio.peer_principal, set by connect_terminate and
	// shared with main_internal); nil for none.
	FilterState map[string]string
}

func (in *Input) header(name string) (string, bool) {
	if in.Header == nil {
		return "", false
	}
	return in.Header(strings.ToLower(name))
}

// Policy is one named policy: it matches when one of its permissions and one of its
// principals match.
type Policy struct {
	Name        string
	Permissions []Permission
	Principals  []Principal
}

// Engine is a compiled config.rbac.v3.RBAC.
type Engine struct {
	Action   Action
	Policies []Policy // sorted by name, as Envoy's std::map
}

// Allowed reports whether in is allowed and the name of the policy that decided it
// ("" when none matched): ALLOW allows iff some policy matches, DENY denies iff some
// policy matches. A nil engine allows everything.
func (e *Engine) Allowed(in *Input) (bool, string) {
	if e == nil {
		return true, ""
	}
	for _, p := range e.Policies {
		if p.matches(in) {
			return e.Action == ActionAllow, p.Name
		}
	}
	return e.Action != ActionAllow, ""
}

func (p *Policy) matches(in *Input) bool {
	perm, princ := false, false
	for _, m := range p.Permissions {
		if m.Match(in) {
			perm = true
			break
		}
	}
	if !perm {
		return false
	}
	for _, m := range p.Principals {
		if m.Match(in) {
			princ = true
			break
		}
	}
	return princ
}

func sortPolicies(ps []Policy) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
}

// ResponseDetail is Envoy's response code detail of a denied request or connection:
// rbac_access_denied_matched_policy[<policy>|none].
func ResponseDetail(policy string) string {
	if policy == "" {
		policy = "none"
	}
	return "rbac_access_denied_matched_policy[" + strings.Join(strings.Fields(policy), "_") + "]"
}
