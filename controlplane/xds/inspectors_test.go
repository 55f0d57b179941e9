package xds

import (
	"encoding/json"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The inspectors run only where a chain needs what they detect, as Istio's
// populateListenerFilters decides per destination port.
func TestInboundListenerFilters(t *testing.T) {
	t.Parallel()
	chain := func(port uint32, transport string, alpn ...string) *listener.FilterChain {
		m := &listener.FilterChainMatch{TransportProtocol: transport, ApplicationProtocols: alpn}
		if port != 0 {
			m.DestinationPort = wrapperspb.UInt32(port)
		}
		return &listener.FilterChain{FilterChainMatch: m}
	}
	blackhole := chain(15006, "")
	cases := []struct {
		name   string
		chains []*listener.FilterChain
		want   string
	}{
		{
			name:   "permissive passthrough, declared HTTP port",
			chains: []*listener.FilterChain{blackhole, chain(0, "tls", "istio-http/1.1"), chain(0, "raw_buffer", "http/1.1", "h2c"), chain(0, "raw_buffer"), chain(8080, "tls", "istio"), chain(8080, "raw_buffer")},
			want: `original_dst; tls_inspector off {"destinationPortRange":{"start":15006,"end":15007}}; ` +
				`http_inspector off {"orMatch":{"rules":[{"destinationPortRange":{"start":8080,"end":8081}},{"destinationPortRange":{"start":15006,"end":15007}}]}}`,
		},
		{
			name:   "strict: no HTTP inspector",
			chains: []*listener.FilterChain{blackhole, chain(0, "tls", "istio-http/1.1"), chain(0, "tls"), chain(9080, "tls")},
			want:   `original_dst; tls_inspector off {"destinationPortRange":{"start":15006,"end":15007}}`,
		},
		{
			name:   "disable passthrough, one strict port: TLS inspector only there",
			chains: []*listener.FilterChain{blackhole, chain(0, "raw_buffer", "http/1.1", "h2c"), chain(0, "raw_buffer"), chain(5432, "tls")},
			want: `original_dst; tls_inspector off {"notMatch":{"destinationPortRange":{"start":5432,"end":5433}}}; ` +
				`http_inspector off {"orMatch":{"rules":[{"destinationPortRange":{"start":5432,"end":5433}},{"destinationPortRange":{"start":15006,"end":15007}}]}}`,
		},
		{
			name:   "no inspector needed",
			chains: []*listener.FilterChain{blackhole, chain(0, "raw_buffer")},
			want:   `original_dst`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lf, err := inboundListenerFilters(tc.chains)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for i, f := range lf {
				if i > 0 {
					got += "; "
				}
				got += f.GetName()[len("envoy.filters.listener."):]
				if f.GetFilterDisabled() != nil {
					js, _ := protojson.Marshal(f.GetFilterDisabled())
					var compact json.RawMessage = js
					b, _ := json.Marshal(compact)
					got += " off " + string(b)
				}
			}
			if got != tc.want {
				t.Errorf("listener filters:\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}
