package tlsctx

import (
	"reflect"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestCompileSharesContextsThatDifferOnlyInSNI compiles the ISTIO_MUTUAL contexts of
// two clusters: the second is the first's compilation with its own SNI (it shares the
// first's secret sources), and both equal what a full compilation gives.
func TestCompileSharesContextsThatDifferOnlyInSNI(t *testing.T) {
	common := istioCommon([]string{"istio-peer-exchange", "istio"}, exact("spiffe://cluster.local/ns/default/sa/cache-test"))
	a := &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: "outbound_.8080_._.a.default.svc.cluster.local"}
	b := &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: "outbound_.8080_._.b.default.svc.cluster.local"}
	ca := mustCompile(t, socket(t, a), false)
	cb := mustCompile(t, socket(t, b), false)
	if reflect.ValueOf(ca.Sources).Pointer() != reflect.ValueOf(cb.Sources).Pointer() {
		t.Error("the second cluster's context was compiled again, not taken from the first")
	}
	for _, tc := range []struct {
		got *Context
		m   *tlsv3.UpstreamTlsContext
	}{{ca, a}, {cb, b}} {
		full, err := compile(socket(t, tc.m).GetTypedConfig(), false)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tc.got, full) {
			t.Errorf("%s: cached %+v, compiled %+v", tc.m.GetSni(), tc.got, full)
		}
	}
	// A context that differs in anything else is its own.
	other := proto.Clone(b).(*tlsv3.UpstreamTlsContext)
	other.CommonTlsContext.AlpnProtocols = []string{"istio"}
	if co := mustCompile(t, socket(t, other), false); !reflect.DeepEqual(co.ALPN, []string{"istio"}) {
		t.Errorf("ALPN = %v, want [istio]", co.ALPN)
	}
	if !reflect.DeepEqual(cb.ALPN, []string{"istio-peer-exchange", "istio"}) {
		t.Errorf("a later compilation changed a cached context: ALPN = %v", cb.ALPN)
	}
}

// TestCompileRefusesWhatItRefusedBeforeItWasCached wants the same refusals with the
// context cached: an SNI over validation's 255 bytes, and a field the proxy does not
// implement next to a cached common context.
func TestCompileRefusesWhatItRefusedBeforeItWasCached(t *testing.T) {
	common := istioCommon(nil, exact("spiffe://cluster.local/ns/default/sa/cache-refusal"))
	mustCompile(t, socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: "ok"}), false)
	long := &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: strings.Repeat("x", 256)}
	_, err := Compile(socket(t, long), false)
	_, want := compile(socket(t, long).GetTypedConfig(), false)
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Errorf("SNI of 256 bytes: err = %v, want %v", err, want)
	}
	reneg := &tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: "ok", MaxSessionKeys: wrapperspb.UInt32(1)}
	if _, err := Compile(socket(t, reneg), false); err == nil || !strings.Contains(err.Error(), "max_session_keys") {
		t.Errorf("max_session_keys: err = %v, want it refused by name", err)
	}
}
