package listener

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tcpChain is a tcp_proxy chain to cluster for destination port port.
func tcpChain(tb testing.TB, name, cluster string, port uint32) *listenerv3.FilterChain {
	tb.Helper()
	return &listenerv3.FilterChain{Name: name, Filters: tcpFilter(tb, cluster),
		FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port)}}
}

// TestDigestsTellWhatChanged compiles variations of a listener with two chains and
// wants Digest to change exactly when the Listener resource does, and OuterDigest
// exactly when something outside its chains does.
func TestDigestsTellWhatChanged(t *testing.T) {
	base := &listenerv3.Listener{
		Name:                   "digest",
		Address:                addr("127.0.0.1", 0),
		ListenerFiltersTimeout: durationpb.New(1e9),
		FilterChains: []*listenerv3.FilterChain{
			tcpChain(t, "one", "a", 1),
			tcpChain(t, "two", "b", 2),
		},
	}
	compile := func(mutate func(l *listenerv3.Listener)) *Config {
		t.Helper()
		l := proto.Clone(base).(*listenerv3.Listener)
		if mutate != nil {
			mutate(l)
		}
		cfg, err := Compile(l)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	orig := compile(nil)
	for _, tc := range []struct {
		name                 string
		mutate               func(l *listenerv3.Listener)
		sameWhole, sameOuter bool
	}{
		{name: "unchanged", mutate: func(*listenerv3.Listener) {}, sameWhole: true, sameOuter: true},
		{name: "chains swapped", mutate: func(l *listenerv3.Listener) {
			l.FilterChains[0], l.FilterChains[1] = l.FilterChains[1], l.FilterChains[0]
		}, sameOuter: true},
		{name: "chain changed", mutate: func(l *listenerv3.Listener) { l.FilterChains[1] = tcpChain(t, "two", "c", 2) }, sameOuter: true},
		{name: "chain removed", mutate: func(l *listenerv3.Listener) { l.FilterChains = l.FilterChains[:1] }, sameOuter: true},
		{name: "default chain added", mutate: func(l *listenerv3.Listener) {
			l.DefaultFilterChain = &listenerv3.FilterChain{Name: "default", Filters: tcpFilter(t, "a")}
		}, sameOuter: true},
		{name: "last chain made the default", mutate: func(l *listenerv3.Listener) {
			l.DefaultFilterChain, l.FilterChains = l.FilterChains[1], l.FilterChains[:1]
		}, sameOuter: true},
		{name: "timeout changed", mutate: func(l *listenerv3.Listener) { l.ListenerFiltersTimeout = durationpb.New(2e9) }},
		{name: "address changed", mutate: func(l *listenerv3.Listener) { l.Address = addr("127.0.0.2", 0) }},
	} {
		got := compile(tc.mutate)
		if (got.Digest == orig.Digest) != tc.sameWhole {
			t.Errorf("%s: same Digest = %v, want %v", tc.name, got.Digest == orig.Digest, tc.sameWhole)
		}
		if (got.OuterDigest == orig.OuterDigest) != tc.sameOuter {
			t.Errorf("%s: same OuterDigest = %v, want %v", tc.name, got.OuterDigest == orig.OuterDigest, tc.sameOuter)
		}
	}
	if orig.Chains[0].Digest == orig.Chains[1].Digest {
		t.Error("two different chains have one digest")
	}
}
