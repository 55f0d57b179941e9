package xds

import (
	"fmt"
	"slices"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A gateway server terminating TLS (SIMPLE, MUTUAL) presents the certificate of the
// Kubernetes Secret its credentialName names, as istiod serves it: over SDS on the
// proxy's ADS stream (istiod's SecretGen, not the agent), as the secret
// "kubernetes://<credentialName>", and for MUTUAL the CA that verifies clients as
// "kubernetes://<credentialName>-cacert" (the Secret's own ca.crt/cacert, else the
// Secret "<credentialName>-cacert"). The Secret is read in the gateway pod's
// namespace, as Istio reads credentials. A server in mode ISTIO_MUTUAL presents the
// gateway's workload certificate instead and takes clients of the mesh.

// CredentialResourcePrefix is the SDS resource name prefix of a credentialName.
const CredentialResourcePrefix = "kubernetes://"

// credentialCASuffix names the CA part of a credential.
const credentialCASuffix = "-cacert"

// gatewayTLSSocket is the downstream TLS of a server terminating TLS.
func gatewayTLSSocket(g gatewayServer) (*core.TransportSocket, error) {
	t := g.s.GetTls()
	name := CredentialResourcePrefix + t.GetCredentialName()
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols:                  alpnDownstreamHTTP,
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: name, SdsConfig: adsConfigSource()}},
		},
	}
	switch t.GetMode() {
	case networking.ServerTLSSettings_ISTIO_MUTUAL:
		// As istiod's ApplyToCommonTLSContext: the gateway's own workload certificate
		// and the mesh root, from its agent over SDS, and a client certificate required
		// (a sidecar's, reaching the gateway with ISTIO_MUTUAL).
		sans := make([]*matcher.StringMatcher, 0, len(t.GetSubjectAltNames()))
		for _, s := range t.GetSubjectAltNames() {
			sans = append(sans, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}})
		}
		ctx.RequireClientCertificate = wrapperspb.Bool(true)
		ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sdsSecretConfig(SecretCertificate)}
		ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchSubjectAltNames: sans}, //nolint:staticcheck // deprecated, and istiod still sends it.
				ValidationContextSdsSecretConfig: sdsSecretConfig(SecretRootCA),
			},
		}
	case networking.ServerTLSSettings_MUTUAL:
		ctx.RequireClientCertificate = wrapperspb.Bool(true)
		ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: name + credentialCASuffix, SdsConfig: adsConfigSource()},
			},
		}
	}
	cfg, err := typed(ctx)
	if err != nil {
		return nil, fmt.Errorf("build downstream tls: %w", err)
	}
	return &core.TransportSocket{Name: wellknown.TransportSocketTLS, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// gatewaySecrets returns the SDS secrets a router pod's servers name, sorted by name
// by the caller; a credential whose Secret does not exist (or holds no certificate)
// is left out, so the proxy keeps waiting for it, as Envoy waits for istiod.
func gatewaySecrets(m *model.Model, pod *model.Pod) []types.Resource {
	var out []types.Resource
	seen := map[string]bool{}
	add := func(s *tlsv3.Secret) {
		if !seen[s.GetName()] {
			seen[s.GetName()] = true
			out = append(out, s)
		}
	}
	for _, g := range gatewayServers(m, pod) {
		if !g.terminatesTLS() || g.s.GetTls().GetMode() == networking.ServerTLSSettings_ISTIO_MUTUAL {
			continue
		}
		cred := g.s.GetTls().GetCredentialName()
		name := CredentialResourcePrefix + cred
		sec := m.Secret(pod.Namespace, cred)
		if sec != nil && sec.Cert != nil {
			add(&tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: inlineBytes(sec.Cert),
				PrivateKey:       inlineBytes(sec.Key),
			}}})
		}
		if g.s.GetTls().GetMode() != networking.ServerTLSSettings_MUTUAL {
			continue
		}
		ca := m.Secret(pod.Namespace, cred+credentialCASuffix)
		if sec != nil && sec.CACert != nil {
			ca = sec
		}
		if ca != nil && ca.CACert != nil {
			add(&tlsv3.Secret{Name: name + credentialCASuffix, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: inlineBytes(ca.CACert),
			}}})
		}
	}
	return out
}

func inlineBytes(b []byte) *core.DataSource {
	return &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: slices.Clone(b)}}
}
