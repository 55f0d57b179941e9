package httpconn

import (
	"net/http"
	"reflect"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// TestHeaderMutationSharedValues pins that a compiled header mutation sets constant
// values without allocating per request, with Envoy's append actions unchanged, and that
// a later level appending to a shared value cannot change what the next request gets.
func TestHeaderMutationSharedValues(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
	opt := func(k, v string, a corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: a}
	}
	route, err := compileHeaderMutation([]*corev3.HeaderValueOption{
		opt("x-set", "route", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
		opt("x-absent", "route", corev3.HeaderValueOption_ADD_IF_ABSENT),
		opt("x-only-existing", "route", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS),
	}, nil, "response_headers_to_add")
	if err != nil {
		t.Fatal(err)
	}
	vhost, err := compileHeaderMutation([]*corev3.HeaderValueOption{
		opt("x-set", "vh", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
		opt("x-new", "vh", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
	}, nil, "response_headers_to_add")
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-Set": {"route", "vh"}, "X-Absent": {"upstream"}, "X-New": {"vh"}}
	for i := range 3 { // the first request's append must not leak into the next
		h := http.Header{"X-Absent": {"upstream"}}
		route.apply(h, nil)
		vhost.apply(h, nil)
		if !reflect.DeepEqual(h, want) {
			t.Fatalf("request %d: headers %v, want %v", i, h, want)
		}
	}
	h := http.Header{}
	if n := testing.AllocsPerRun(100, func() { route.apply(h, nil) }); n != 0 {
		t.Errorf("overwrite and add-if-absent allocate %v objects per request, want 0", n)
	}
}

// TestServerAndForwardedProtoShared pins that the Server header and x-forwarded-proto
// are set from values made once, and that Server follows a ServerName changed after
// Compile.
func TestServerAndForwardedProtoShared(t *testing.T) {
	// Not parallel: testing.AllocsPerRun.
	rt := &router{cfg: &Config{ServerName: "envoy", serverValues: sharedValues("envoy")}}
	h := http.Header{}
	if n := testing.AllocsPerRun(100, func() { rt.setServer(h) }); n != 0 {
		t.Errorf("setServer allocates %v objects per response, want 0", n)
	}
	if got := h.Get("Server"); got != "envoy" {
		t.Errorf("Server %q, want envoy", got)
	}
	rt.cfg.ServerName = "istio-envoy"
	rt.setServer(h)
	if got := h.Values("Server"); len(got) != 1 || got[0] != "istio-envoy" {
		t.Errorf("Server %q after ServerName changed, want [istio-envoy]", got)
	}
	if cap(protoHTTP) != 1 || cap(protoHTTPS) != 1 || cap(sharedValues("x")) != 1 {
		t.Error("shared header values have spare capacity: an append would write into them")
	}
}
