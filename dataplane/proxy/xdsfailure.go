package proxy

import (
	"fmt"
	"strings"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// failure is one resource of an LDS or CDS response that was refused while the rest of
// the response applied. (RDS and EDS refusals have no failure: Envoy keeps no error state
// for route configurations or load assignments.)
type failure struct {
	name string
	msg  proto.Message // the refused resource
	err  error
	dup  bool // refused as a duplicate name, before the listener manager saw it
}

// checked is a resource message with protoc-gen-validate checks.
type checked interface {
	proto.Message
	ValidateAll() error
}

// validated is a checked resource message that carries its name.
type validated interface {
	checked
	GetName() string
}

// decodeAll unpacks and validates every resource of a response. As Envoy's resource
// decoder (anyConvertAndValidate) runs before any resource is applied, one resource that
// does not decode or violates its proto constraints rejects the whole response.
func decodeAll[T validated](resources []*anypb.Any, newMsg func() T, kind string) ([]T, error) {
	return decodeAllNamed(resources, newMsg, kind, T.GetName, nil)
}

// decodeAllNamed is decodeAll for resources whose name is not their name field (a
// ClusterLoadAssignment is named by cluster_name). fast, when not nil, decodes and
// validates a resource its own way (RDS's reuse of unchanged virtual hosts); a resource
// it does not take (false) is decoded as any other, which says why it is refused.
func decodeAllNamed[T checked](resources []*anypb.Any, newMsg func() T, kind string, name func(T) string, fast func(*anypb.Any) (T, bool)) ([]T, error) {
	out := make([]T, 0, len(resources))
	for i, a := range resources {
		if fast != nil {
			if m, ok := fast(a); ok {
				out = append(out, m)
				continue
			}
		}
		m, err := unpack(a, newMsg(), kind, i)
		if err != nil {
			return nil, err
		}
		if err := m.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s '%s': %w", kind, name(m), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// firstByName indexes the resources of a response by name; of several with one name the
// first counts, as Envoy's SotW mux builds its resource map with emplace.
func firstByName[T checked](ms []T, name func(T) string) map[string]T {
	out := make(map[string]T, len(ms))
	for _, m := range ms {
		if _, ok := out[name(m)]; !ok {
			out[name(m)] = m
		}
	}
	return out
}

// ldsError is the NACK of an LDS response with refused listeners, as LdsApiImpl words it.
func ldsError(failed []failure) error {
	var b strings.Builder
	for _, f := range failed {
		fmt.Fprintf(&b, "%s: %v\n", f.name, f.err)
	}
	return fmt.Errorf("Error adding/updating listener(s) %s", b.String()) //nolint:staticcheck // Envoy's exact text
}

// cdsError is the NACK of a CDS response with refused clusters, as CdsApiImpl words it.
func cdsError(failed []failure) error {
	parts := make([]string, 0, len(failed))
	for _, f := range failed {
		parts = append(parts, fmt.Sprintf("%s: %v", f.name, f.err))
	}
	return fmt.Errorf("Error adding/updating cluster(s) %s", strings.Join(parts, ", ")) //nolint:staticcheck // Envoy's exact text
}

// setFailures replaces the refusals kept for /config_dump with those of the latest
// update, as Envoy's listener manager clears its error states when an update begins.
func (td *typeDump) setFailures(failed []failure, at time.Time) {
	td.failures = failed
	td.failedAt = at
}

// errorStates returns the error_state of each refused listener by name (Envoy's
// error_state_tracker_: the failed configuration, the time of the attempt and the reason;
// a duplicate name never reached the listener manager and has none), and the unnamed
// states of the whole update (Envoy's overall_error_state_, without a time).
func (td *typeDump) errorStates() (named map[string]*adminv3.UpdateFailureState, overall []*adminv3.UpdateFailureState) {
	if td == nil {
		return nil, nil
	}
	named = map[string]*adminv3.UpdateFailureState{}
	for _, f := range td.failures {
		cfg := mustAny(f.msg)
		overall = append(overall, &adminv3.UpdateFailureState{FailedConfiguration: cfg, Details: f.err.Error()})
		if !f.dup {
			named[f.name] = &adminv3.UpdateFailureState{FailedConfiguration: cfg, LastUpdateAttempt: ts(td.failedAt), Details: f.err.Error()}
		}
	}
	return named, overall
}
