package xds

import (
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Trust domain migration, as istiod's trust domain bundle (pilot/pkg/security/trustdomain):
// a policy's source principal names a trust domain, and istiod rewrites it to every
// trust domain of the mesh (its trustDomain, then its trustDomainAliases) when it names
// one of them or "cluster.local", which in a policy stands for the mesh's own trust
// domain whatever it is. So a policy written for old-td keeps matching workloads whose
// certificates say new-td once old-td is an alias, and a policy written with
// cluster.local follows every migration. A principal naming another trust domain, or
// none that is enforced ("*" or not five path segments), is kept as written.

// migratePrincipals returns principals with their trust domains rewritten as istiod's
// Bundle.ReplaceTrustDomainAliases does, for the mesh's trust domains tds (TrustDomains).
func migratePrincipals(tds, principals []string) []string {
	out := make([]string, 0, len(principals))
	for _, p := range principals {
		td, ok := principalTrustDomain(p)
		if !ok || (td != model.DefaultTrustDomain && !trustDomainListed(td, tds)) {
			out = append(out, p)
			continue
		}
		var each []string
		for _, t := range tds {
			// A principal whose trust domain is written "*suffix" and matches t is kept as
			// written: it stands for t and the others it matches alike.
			np := p
			if !strings.HasPrefix(td, "*") || !strings.HasSuffix(t, td[1:]) {
				np = t + p[len(td):]
			}
			if !slices.Contains(each, np) {
				each = append(each, np)
			}
		}
		out = append(out, each...)
	}
	return out
}

// migrateAll is migratePrincipals, nil for none.
func migrateAll(tds, principals []string) []string {
	if len(principals) == 0 {
		return nil
	}
	return migratePrincipals(tds, principals)
}

// principalTrustDomain returns the trust domain of a policy principal
// (<trust domain>/ns/<ns>/sa/<sa>, no spiffe://); ok is false when the principal does
// not enforce one: "*" as its trust domain, or not five segments.
func principalTrustDomain(p string) (string, bool) {
	parts := strings.Split(p, "/")
	if len(parts) != 5 || parts[0] == "*" {
		return "", false
	}
	return parts[0], true
}

// trustDomainListed reports whether td is one of tds under istiod's loose trust domain
// match: equal, or either side a "*" wildcard, a "prefix*" or a "*suffix" of the other.
func trustDomainListed(td string, tds []string) bool {
	for _, t := range tds {
		if td == t || t == "*" || wildcardMatch(td, t) || wildcardMatch(t, td) {
			return true
		}
	}
	return false
}

// wildcardMatch reports whether pattern, "prefix*" or "*suffix", matches s.
func wildcardMatch(s, pattern string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok && strings.HasPrefix(s, p) {
		return true
	}
	if p, ok := strings.CutPrefix(pattern, "*"); ok && strings.HasSuffix(s, p) {
		return true
	}
	return false
}

// expandSANs adds to the SPIFFE identities ids their forms in each trust domain alias,
// as istiod's ExpandWithTrustDomains gives a service's accounts: a client accepts a
// server whose certificate says an alias. The result is sorted.
func expandSANs(ids, aliases []string) []string {
	out := slices.Clone(ids)
	for _, id := range ids {
		rest, ok := strings.CutPrefix(id, "spiffe://")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		for _, a := range aliases {
			if x := "spiffe://" + a + "/" + path; !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	slices.Sort(out)
	return out
}
