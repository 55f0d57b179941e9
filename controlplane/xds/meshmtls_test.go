package xds

import (
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestDownstreamMTLSMinVersion holds the inbound mTLS chains to the mesh's
// meshMTLS.minProtocolVersion as istiod's BuildInboundTLS sets it (GetMinTLSVersion):
// TLS 1.2 to 1.3 by default, 1.3 only with TLSV1_3, for HTTP and TCP chains alike.
func TestDownstreamMTLSMinVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mesh model.MeshConfig
		want tlsv3.TlsParameters_TlsProtocol
	}{
		{name: "default", want: tlsv3.TlsParameters_TLSv1_2},
		{name: "TLSV1_3", mesh: model.MeshConfig{MeshMTLSMinTLS13: true}, want: tlsv3.TlsParameters_TLSv1_3},
	} {
		for _, protocol := range []model.Protocol{model.ProtocolHTTP, model.ProtocolTCP} {
			ts, err := downstreamMTLSSocket(protocol, tc.mesh)
			if err != nil {
				t.Fatal(err)
			}
			var ctx tlsv3.DownstreamTlsContext
			if err := ts.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
				t.Fatal(err)
			}
			p := ctx.GetCommonTlsContext().GetTlsParams()
			if p.GetTlsMinimumProtocolVersion() != tc.want || p.GetTlsMaximumProtocolVersion() != tlsv3.TlsParameters_TLSv1_3 {
				t.Errorf("%s, %s: tls params %v, want %s to TLSv1_3", tc.name, protocol, p, tc.want)
			}
		}
	}
}
