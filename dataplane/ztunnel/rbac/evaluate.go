package rbac

import (
	"slices"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// Set is every policy a ztunnel holds, indexed as ztunnel's PolicyStore indexes them:
// by key, and the GLOBAL and NAMESPACE scoped ones by namespace ("" for GLOBAL). A Set is
// immutable: build a new one when WADS changes.
type Set struct {
	byKey map[string]*Policy
	// byNamespace holds the keys of the NAMESPACE-scoped policies of each namespace and,
	// under "", the GLOBAL ones, sorted so decisions and logs are deterministic (ztunnel
	// walks a hash set).
	byNamespace map[string][]string
}

// NewSet compiles auths. A resource Compile refuses is left out and its error returned
// beside the set (ztunnel rejects it and keeps the rest); a later resource with the same
// key replaces an earlier one.
func NewSet(auths []*security.Authorization) (*Set, []error) {
	s := &Set{byKey: make(map[string]*Policy, len(auths)), byNamespace: map[string][]string{}}
	var errs []error
	for _, a := range auths {
		p, err := Compile(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.byKey[p.Key()] = p
	}
	for key, p := range s.byKey {
		switch p.Scope {
		case security.Scope_GLOBAL:
			s.byNamespace[""] = append(s.byNamespace[""], key)
		case security.Scope_NAMESPACE:
			s.byNamespace[p.Namespace] = append(s.byNamespace[p.Namespace], key)
		case security.Scope_WORKLOAD_SELECTOR:
			// found only through a workload's authorization_policies
		}
	}
	for _, keys := range s.byNamespace {
		slices.Sort(keys)
	}
	return s, errs
}

// Get is the policy with key "namespace/name", or nil.
func (s *Set) Get(key string) *Policy { return s.byKey[key] }

// Len is the number of policies in the set.
func (s *Set) Len() int { return len(s.byKey) }

// Policies are the set's policies sorted by key (the order of ztunnel's config_dump).
func (s *Set) Policies() []*Policy {
	out := make([]*Policy, 0, len(s.byKey))
	for _, p := range s.byKey {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Policy) int {
		if a.Key() < b.Key() {
			return -1
		}
		if a.Key() > b.Key() {
			return 1
		}
		return 0
	})
	return out
}

// Reason is why a decision was made, in ztunnel's words.
type Reason uint8

// The outcomes of ztunnel's evaluation, in its order.
const (
	// DenyMatched: a (non dry-run) DENY policy matched.
	DenyMatched Reason = iota + 1
	// NoAllowPolicies: nothing denied and no ALLOW policy applies.
	NoAllowPolicies
	// AllowMatched: an ALLOW policy matched.
	AllowMatched
	// NoAllowMatched: ALLOW policies apply and none matched.
	NoAllowMatched
)

// String is ztunnel's log message for the outcome.
func (r Reason) String() string {
	switch r {
	case DenyMatched:
		return "deny policy match"
	case NoAllowPolicies:
		return "no allow policies, allow"
	case AllowMatched:
		return "allow policy match"
	case NoAllowMatched:
		return "no allow policies matched"
	}
	return "undecided"
}

// Event is one line ztunnel's authorization log would print for the decision.
type Event struct {
	Policy  string // the policy's key; "" for lines about no policy in particular
	Message string
}

// Decision is the outcome for one connection.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Policy is the key of the policy that decided (the matching DENY or ALLOW); "" when
	// the absence of policies decided.
	Policy string
	// Events are ztunnel's authorization log lines for this decision, dry-run matches
	// first, in evaluation order.
	Events []Event
	// Unknown are names in the workload's authorization_policies the set lacks (ztunnel
	// warns "skipping unknown policy" and evaluates without them).
	Unknown []string
}

// Err is ztunnel's rejection for a denied decision ("explicitly denied by: ns/name",
// "allow policies exist, but none allowed"), nil when allowed.
func (d Decision) Err() error {
	if d.Allowed {
		return nil
	}
	if d.Reason == DenyMatched {
		return &RejectionError{Policy: d.Policy}
	}
	return &RejectionError{}
}

// RejectionError is a connection refused by policy.
type RejectionError struct {
	// Policy is the DENY policy's key; "" when no ALLOW policy matched.
	Policy string
}

func (e *RejectionError) Error() string {
	if e.Policy != "" {
		return "connection closed due to policy rejection: explicitly denied by: " + e.Policy
	}
	return "connection closed due to policy rejection: allow policies exist, but none allowed"
}

// Applicable are the keys of the policies that apply to a workload: the NAMESPACE-scoped
// ones of its namespace, the GLOBAL ones, then its authorization_policies, each once, and
// the names in its list the set does not hold.
func (s *Set) Applicable(w *workload.Workload) (keys, unknown []string) {
	seen := map[string]bool{}
	add := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		if s.byKey[k] == nil {
			unknown = append(unknown, k)
			return
		}
		keys = append(keys, k)
	}
	for _, k := range s.byNamespace[w.GetNamespace()] {
		add(k)
	}
	for _, k := range s.byNamespace[""] {
		add(k)
	}
	for _, k := range w.GetAuthorizationPolicies() {
		add(k)
	}
	return keys, unknown
}

// Evaluate decides c into the destination workload dst as ztunnel's assert_rbac does.
func (s *Set) Evaluate(dst *workload.Workload, c Conn) Decision {
	keys, unknown := s.Applicable(dst)
	var allow, deny, allowDry, denyDry []*Policy
	for _, k := range keys {
		p := s.byKey[k]
		switch {
		case p.Action == security.Action_DENY && p.DryRun:
			denyDry = append(denyDry, p)
		case p.Action == security.Action_DENY:
			deny = append(deny, p)
		case p.DryRun:
			allowDry = append(allowDry, p)
		default:
			allow = append(allow, p)
		}
	}
	d := Decision{Unknown: unknown}
	for _, p := range denyDry {
		if p.Matches(c) {
			d.Events = append(d.Events, Event{Policy: p.Key(), Message: "dry-run: deny policy match"})
		}
	}
	for _, p := range deny {
		if p.Matches(c) {
			return d.decide(false, DenyMatched, p.Key())
		}
	}
	dryAllowMatched := false
	for _, p := range allowDry {
		if p.Matches(c) {
			dryAllowMatched = true
			d.Events = append(d.Events, Event{Policy: p.Key(), Message: "dry-run: allow policy match"})
		}
	}
	if len(allow) == 0 {
		if len(allowDry) > 0 && !dryAllowMatched {
			d.Events = append(d.Events, Event{Message: "dry-run: no allow policies match"})
		}
		return d.decide(true, NoAllowPolicies, "")
	}
	for _, p := range allow {
		if p.Matches(c) {
			return d.decide(true, AllowMatched, p.Key())
		}
	}
	return d.decide(false, NoAllowMatched, "")
}

func (d Decision) decide(allowed bool, r Reason, policy string) Decision {
	d.Allowed, d.Reason, d.Policy = allowed, r, policy
	d.Events = append(d.Events, Event{Policy: policy, Message: r.String()})
	return d
}

// Evaluate compiles auths and decides c into dst: for a one-off decision (trace, tests).
// A ztunnel keeps a Set and calls its Evaluate.
func Evaluate(auths []*security.Authorization, dst *workload.Workload, c Conn) Decision {
	s, _ := NewSet(auths)
	return s.Evaluate(dst, c)
}
