package tlstest

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// SDSRef is Istio's reference to a secret served by the sds-grpc cluster.
func SDSRef(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType: corev3.ApiConfigSource_GRPC, TransportApiVersion: corev3.ApiVersion_V3, SetNodeOnFirstMessageOnly: true,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "sds-grpc"}}}},
		}},
	}}
}

// IstioCommon is the CommonTlsContext Istio generates for ISTIO_MUTUAL: the `default`
// certificate, `ROOTCA`, and URI SAN matchers.
func IstioCommon(alpn []string, sans ...*matcherv3.StringMatcher) *tlsv3.CommonTlsContext {
	var typed []*tlsv3.SubjectAltNameMatcher
	for _, m := range sans {
		typed = append(typed, &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: m})
	}
	return &tlsv3.CommonTlsContext{
		AlpnProtocols:                  alpn,
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{SDSRef("default")},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: typed},
			ValidationContextSdsSecretConfig: SDSRef("ROOTCA"),
		}},
	}
}

// Socket wraps a DownstreamTlsContext or UpstreamTlsContext in Envoy's TLS transport socket.
func Socket(tb testing.TB, m proto.Message) *corev3.TransportSocket {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

// Exact is a StringMatcher for exactly s.
func Exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

// Prefix is a StringMatcher for strings starting with s.
func Prefix(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: s}}
}
