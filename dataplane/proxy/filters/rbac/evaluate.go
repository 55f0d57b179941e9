package rbac

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/structpb"
)

// Envoy's RBAC dynamic metadata keys (Filters::Common::RBAC::DynamicMetadataKeys), each
// after the prefix of the rules it reports (shadow_rules_stat_prefix, rules_stat_prefix),
// and the engine results they carry.
const (
	ShadowEffectivePolicyIDKey   = "shadow_effective_policy_id"
	ShadowEngineResultKey        = "shadow_engine_result"
	EnforcedEffectivePolicyIDKey = "enforced_effective_policy_id"
	EnforcedEngineResultKey      = "enforced_engine_result"
	ResultAllowed                = "allowed"
	ResultDenied                 = "denied"
)

// LoggerName is the Envoy logger the RBAC filters log to (rbac:debug shows decisions).
const LoggerName = "rbac"

// Result is one RBAC filter's evaluation of a request or connection.
type Result struct {
	// Allowed is the enforced decision (true without enforced rules); Policy the
	// enforced engine's deciding policy, "" when none matched.
	Allowed bool
	Policy  string
	// Metadata are the dynamic metadata fields the filter sets under its name (nil when
	// it sets none): the shadow engine's result and policy, and on the HTTP filter the
	// enforced engine's.
	Metadata map[string]*structpb.Value
}

// MergeInto merges r's metadata into md under the filter name, as Envoy's
// setDynamicMetadata merges a filter's fields into those already there (two RBAC
// filters, DENY then ALLOW, share the namespace; their prefixes keep the keys apart).
func (r Result) MergeInto(md map[string]*structpb.Struct, filter string) {
	if len(r.Metadata) == 0 {
		return
	}
	st := md[filter]
	if st == nil {
		st = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		md[filter] = st
	}
	for k, v := range r.Metadata {
		st.Fields[k] = v
	}
}

// Check evaluates one HTTP RBAC filter on a request, as Envoy's RBAC HTTP filter's
// decodeHeaders: the shadow rules first (counted in shadow_allowed/shadow_denied and
// reported in the metadata, never enforced), then the enforced rules (allowed/denied),
// each decision logged at debug on log (the rbac logger). Without either engine the
// request is allowed and nothing is counted.
func (s Stats) Check(r *Rules, in *Input, log *slog.Logger) Result {
	return s.evaluate(r, in, log, true)
}

// CheckConnection is Check for the network RBAC filter: its metadata carry the shadow
// result only, and its log lines speak of a connection.
func (s Stats) CheckConnection(r *Rules, in *Input, log *slog.Logger) Result {
	return s.evaluate(r, in, log, false)
}

func (s Stats) evaluate(r *Rules, in *Input, log *slog.Logger, http bool) Result {
	debug := log != nil && log.Enabled(context.Background(), slog.LevelDebug)
	if debug {
		log.Debug(checkingLine(in, http))
	}
	out := Result{Allowed: true}
	set := func(k, v string) {
		if out.Metadata == nil {
			out.Metadata = map[string]*structpb.Value{}
		}
		out.Metadata[k] = structpb.NewStringValue(v)
	}
	if r.Shadow != nil {
		ok, policy := r.Shadow.Allowed(in)
		result := ResultAllowed
		if ok {
			s.ShadowAllowed.Inc()
		} else {
			s.ShadowDenied.Inc()
			result = ResultDenied
		}
		if debug {
			log.Debug(fmt.Sprintf("shadow %s, matched policy %s", result, orNone(policy)))
		}
		if policy != "" {
			set(r.ShadowRulesStatPrefix+ShadowEffectivePolicyIDKey, policy)
		}
		set(r.ShadowRulesStatPrefix+ShadowEngineResultKey, result)
	}
	if r.Engine == nil {
		if debug {
			log.Debug("no engine, allowed by default")
		}
		return out
	}
	ok, policy := r.Engine.Allowed(in)
	out.Allowed, out.Policy = ok, policy
	result := ResultAllowed
	if ok {
		s.Allowed.Inc()
	} else {
		s.Denied.Inc()
		result = ResultDenied
	}
	if debug {
		log.Debug(fmt.Sprintf("enforced %s, matched policy %s", result, orNone(policy)))
	}
	if http {
		if policy != "" {
			set(r.RulesStatPrefix+EnforcedEffectivePolicyIDKey, policy)
		}
		set(r.RulesStatPrefix+EnforcedEngineResultKey, result)
	}
	return out
}

func orNone(policy string) string {
	if policy == "" {
		return "none"
	}
	return policy
}

// checkingLine is the filters' first debug line, what Envoy prints before deciding:
// the connection's addresses, its peer certificate, and for a request its headers; the
// dynamic metadata in protobuf text form.
func checkingLine(in *Input, http bool) string {
	var b strings.Builder
	if http {
		b.WriteString("checking request: ")
	} else {
		b.WriteString("checking connection: ")
	}
	fmt.Fprintf(&b, "requestedServerName: %s, sourceIP: %s, directRemoteIP: %s,", in.ServerName, in.DirectRemote, in.DirectRemote)
	if http {
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "remoteIP: %s,", in.Remote)
	if !http {
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "localAddress: %s, ssl: ", in.Local)
	if in.TLS {
		var uris, dns []string
		subject := ""
		if in.Peer != nil {
			for _, u := range in.Peer.URIs {
				uris = append(uris, u.String())
			}
			dns = in.Peer.DNSNames
			subject = in.Peer.Subject.String()
		}
		fmt.Fprintf(&b, "uriSanPeerCertificate: %s, dnsSanPeerCertificate: %s, subjectPeerCertificate: %s",
			strings.Join(uris, ","), strings.Join(dns, ","), subject)
	} else {
		b.WriteString("none")
	}
	if http {
		b.WriteString(", headers: ")
		if in.Headers != nil {
			for _, h := range in.Headers() {
				fmt.Fprintf(&b, "'%s', '%s'\n", h[0], h[1])
			}
		}
	}
	b.WriteString(", dynamicMetadata: ")
	if len(in.DynamicMetadata) > 0 {
		md, _ := prototext.MarshalOptions{Multiline: true}.Marshal(&corev3.Metadata{FilterMetadata: in.DynamicMetadata})
		b.Write(md)
	}
	return b.String()
}
