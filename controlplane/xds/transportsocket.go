package xds

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rawbuffer "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Names of the SDS secrets the agent serves and of the bootstrap cluster it serves them on.
const (
	// SecretCertificate is the SDS secret holding the workload's certificate and key.
	SecretCertificate = "default"
	// SecretRootCA is the SDS secret holding the mesh trust bundle.
	SecretRootCA = "ROOTCA"
	// SDSCluster is the bootstrap's static cluster reaching the agent's SDS server.
	SDSCluster = "sds-grpc"
)

// Transport socket names and the endpoint metadata that picks one, as Istio's.
const (
	// TransportSocketMatchKey is the endpoint filter_metadata key a cluster's
	// transport_socket_matches compare against.
	TransportSocketMatchKey = "envoy.transport_socket_match"
	// TLSModeKey and TLSModeIstio are the key/value marking an endpoint that accepts mTLS.
	TLSModeKey   = "tlsMode"
	TLSModeIstio = "istio"
)

// ALPN lists, as Istio's: what a client sidecar offers to a server sidecar, and what
// the server's mTLS chains match on and answer with.
var (
	alpnUpstreamHTTP = []string{"istio-http/1.1", "istio", "http/1.1"}
	alpnUpstreamH2   = []string{"istio-h2", "istio", "h2"} // istio.alpn's for HTTP/2 requests
	alpnUpstreamTCP  = []string{"istio-peer-exchange", "istio"}
	// alpnUpstreamMeshH2 is Istio's ALPNInMeshH2WithMxc, an HTTP/2 cluster's.
	alpnUpstreamMeshH2 = []string{"istio-peer-exchange", "istio", "h2"}
	// alpnInboundMTLS is Istio's allIstioMtlsALPNs: what a PERMISSIVE port's mTLS chain
	// matches, whatever protocol the client's sidecar detected.
	alpnInboundMTLS    = []string{"istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
	alpnDownstreamHTTP = []string{"h2", "http/1.1"}
	// alpnDownstreamTCP is Istio's ALPNDownstreamWithMxc, what a TCP mTLS chain answers.
	alpnDownstreamTCP = []string{"istio-peer-exchange", "h2", "http/1.1"}
)

// sdsSecretConfig fetches the named secret from the agent over SDS, as Istio's sidecars do.
func sdsSecretConfig(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{
		Name: name,
		SdsConfig: &core.ConfigSource{
			ConfigSourceSpecifier: &core.ConfigSource_ApiConfigSource{ApiConfigSource: &core.ApiConfigSource{
				ApiType: core.ApiConfigSource_GRPC,
				GrpcServices: []*core.GrpcService{{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: SDSCluster},
				}}},
				SetNodeOnFirstMessageOnly: true,
				TransportApiVersion:       core.ApiVersion_V3,
			}},
			InitialFetchTimeout: durationpb.New(0),
			ResourceApiVersion:  core.ApiVersion_V3,
		},
	}
}

// commonTLSContext presents the workload certificate and checks the peer against the
// mesh root and the given SAN matchers.
func commonTLSContext(alpn []string, sans []*matcher.StringMatcher) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		},
		AlpnProtocols:                  alpn,
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsSecretConfig(SecretCertificate)},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchSubjectAltNames: sans}, //nolint:staticcheck // deprecated, and istiod still sends it.
				ValidationContextSdsSecretConfig: sdsSecretConfig(SecretRootCA),
			},
		},
	}
}

// upstreamMTLSSocket is the client side of Istio mTLS to one cluster: SNI
// "outbound_.<port>_.<subset>_.<host>" and the peer verified against sans. The ALPN is
// Istio's for in-mesh clusters, istio-peer-exchange and istio (and h2 for an HTTP/2
// cluster); an HTTP request's own (istio-http/1.1, istio-h2...) is put first by the
// istio.alpn filter of the outbound connection manager.
func upstreamMTLSSocket(port uint16, subset, host string, protocol model.Protocol, sans []string) (*core.TransportSocket, error) {
	return upstreamMTLSSocketSNI(port, subset, host, protocol, sans, "")
}

// upstreamMTLSSocketSNI is upstreamMTLSSocket with the SNI a DestinationRule's
// ISTIO_MUTUAL names ("" for the cluster's).
func upstreamMTLSSocketSNI(port uint16, subset, host string, protocol model.Protocol, sans []string, sni string) (*core.TransportSocket, error) {
	alpn := alpnUpstreamTCP
	if isHTTP2(protocol) {
		alpn = alpnUpstreamMeshH2
	}
	matchers := make([]*matcher.StringMatcher, 0, len(sans))
	for _, s := range sans {
		matchers = append(matchers, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}})
	}
	cfg, err := typed(&tlsv3.UpstreamTlsContext{
		CommonTlsContext: commonTLSContext(alpn, matchers),
		Sni:              cmp.Or(sni, "outbound_."+strconv.Itoa(int(port))+"_."+subset+"_."+host),
	})
	if err != nil {
		return nil, fmt.Errorf("build upstream tls: %w", err)
	}
	return &core.TransportSocket{Name: wellknown.TransportSocketTLS, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// rawBufferSocket is the explicit plaintext transport socket.
func rawBufferSocket() (*core.TransportSocket, error) {
	cfg, err := typed(&rawbuffer.RawBuffer{})
	if err != nil {
		return nil, err
	}
	return &core.TransportSocket{Name: wellknown.TransportSocketRawBuffer, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// downstreamMTLSSocket is the server side of Istio mTLS on an inbound chain, as
// Istio's BuildInboundTLS: a client certificate is required and must carry a SPIFFE URI
// of one of the mesh's trust domains tds (its trust domain and aliases, istiod's
// TrustDomainsForValidation) signed by the mesh root; HTTP chains answer h2 or
// http/1.1, TCP chains istio-peer-exchange too; the cipher suites are Istio's strong
// ones (TLS 1.2; TLS 1.3's are fixed). The lowest version is the mesh's
// meshMTLS.minProtocolVersion (GetMinTLSVersion's: TLS 1.3, or else TLS 1.2).
func downstreamMTLSSocket(protocol model.Protocol, mesh model.MeshConfig) (*core.TransportSocket, error) {
	tds := mesh.TrustDomains()
	alpn := alpnDownstreamHTTP
	if !protocol.IsHTTP() {
		alpn = alpnDownstreamTCP
	}
	sans := make([]*matcher.StringMatcher, 0, len(tds))
	for _, td := range tds {
		sans = append(sans, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: "spiffe://" + td + "/"}})
	}
	common := commonTLSContext(alpn, sans)
	common.TlsParams.CipherSuites = serverCipherSuites
	if mesh.MeshMTLSMinTLS13 {
		common.TlsParams.TlsMinimumProtocolVersion = tlsv3.TlsParameters_TLSv1_3
	}
	cfg, err := typed(&tlsv3.DownstreamTlsContext{
		CommonTlsContext:         common,
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("build downstream tls: %w", err)
	}
	return &core.TransportSocket{Name: wellknown.TransportSocketTLS, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// serverCipherSuites are Istio's SupportedCiphers for server-side TLS.
var serverCipherSuites = []string{
	"ECDHE-ECDSA-AES256-GCM-SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384",
	"ECDHE-ECDSA-AES128-GCM-SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256",
	"AES256-GCM-SHA384",
	"AES128-GCM-SHA256",
}

// SecretFileRootPrefix names an SDS validation secret the agent reads from a file, as
// Istio's agent serves "file-root:<path>"; SecretSystemRoots ("file-root:system") is the
// proxy's system trust bundle, what a DestinationRule's SIMPLE TLS without
// caCertificates verifies against (Istio's VERIFY_CERTIFICATE_AT_CLIENT).
const (
	SecretFileRootPrefix = "file-root:"
	SecretSystemRoots    = SecretFileRootPrefix + "system"
)

// applyOriginationTLS gives cluster c the client TLS of a DestinationRule's SIMPLE or
// MUTUAL mode (TLS origination), as istiod's constructUpstreamTLS: TLS 1.2 to 1.3, the
// server verified against the Secret credentialName names (served over ADS as
// "kubernetes://<name>-cacert"), else the caCertificates file, else the system roots
// (both served by the agent over SDS), with the rule's subjectAltNames; h2 is offered
// on an HTTP/2 port. MUTUAL also presents the client certificate of that Secret,
// "kubernetes://<name>" over ADS (istiod's ApplyCustomSDSToClientCommonTLSContext);
// the config loader refuses MUTUAL without credentialName. Departure: istiod leaves sni
// empty and sets the cluster's upstream_http_protocol_options auto_sni and
// auto_san_validation, so Envoy takes both from each request's Host; meshlab's proxy
// has no auto_sni, so an unset sni is the cluster's host and the certificate must
// carry that host as a SAN, which is what Envoy does for the requests a ServiceEntry
// host receives.
func applyOriginationTLS(c *cluster.Cluster, sp servicePort, tls *networking.ClientTLSSettings) error {
	ts, err := originationTLSSocket(sp.host, sp.port.Protocol, tls)
	if err != nil {
		return err
	}
	c.TransportSocket = ts
	c.TransportSocketMatches = nil
	return nil
}

// originationTLSSocket is the TLS transport socket of a DestinationRule's SIMPLE or
// MUTUAL setting for a cluster of host on a port of protocol (applyOriginationTLS's;
// a waypoint wraps it in the internal upstream transport).
func originationTLSSocket(host string, protocol model.Protocol, tls *networking.ClientTLSSettings) (*core.TransportSocket, error) {
	sni := tls.GetSni()
	sans := tls.GetSubjectAltNames()
	if sni == "" {
		sni = host
		if len(sans) == 0 {
			sans = []string{host}
		}
	}
	matchers := make([]*matcher.StringMatcher, 0, len(sans))
	for _, s := range sans {
		matchers = append(matchers, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}})
	}
	var roots *tlsv3.SdsSecretConfig
	if cred := tls.GetCredentialName(); cred != "" {
		roots = &tlsv3.SdsSecretConfig{Name: CredentialResourcePrefix + cred + credentialCASuffix, SdsConfig: adsConfigSource()}
	} else {
		roots = sdsSecretConfig(SecretFileRootPrefix + cmp.Or(tls.GetCaCertificates(), "system"))
		// istiod sets initial_fetch_timeout on the workload certificate's and root's
		// secrets only, leaving Envoy's default on a file's.
		roots.SdsConfig.InitialFetchTimeout = nil
	}
	common := &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchSubjectAltNames: matchers}, //nolint:staticcheck // deprecated, and istiod still sends it.
				ValidationContextSdsSecretConfig: roots,
			},
		},
	}
	if tls.GetMode() == networking.ClientTLSSettings_MUTUAL && tls.GetCredentialName() != "" {
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: CredentialResourcePrefix + tls.GetCredentialName(), SdsConfig: adsConfigSource()}}
	}
	if isHTTP2(protocol) {
		common.AlpnProtocols = []string{"h2"}
	}
	cfg, err := typed(&tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: sni})
	if err != nil {
		return nil, fmt.Errorf("build upstream tls: %w", err)
	}
	return &core.TransportSocket{Name: wellknown.TransportSocketTLS, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// withOriginationSecrets adds to secrets (a pod's gateway secrets) the secrets its
// clusters' SIMPLE and MUTUAL TLS name by credentialName: "kubernetes://<name>-cacert",
// the CA of the Secret <name> (its ca.crt or cacert), else of the Secret
// "<name>-cacert"; and for MUTUAL "kubernetes://<name>", the Secret's certificate and
// key. They are read in the proxy's namespace ns, as istiod reads credentials. A Secret
// that is missing is left out, so the proxy waits for it as Envoy waits for istiod.
func withOriginationSecrets(secrets []types.Resource, m *model.Model, ns string) []types.Resource {
	seen := map[string]bool{}
	for _, s := range secrets {
		seen[cachev3.GetResourceName(s)] = true
	}
	for _, cred := range originationCredentials(m) {
		name := CredentialResourcePrefix + cred.name
		if sec := m.Secret(ns, cred.name); cred.mutual && !seen[name] && sec != nil && sec.Cert != nil {
			seen[name] = true
			secrets = append(secrets, &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: inlineBytes(sec.Cert),
				PrivateKey:       inlineBytes(sec.Key),
			}}})
		}
		name += credentialCASuffix
		if seen[name] {
			continue
		}
		ca := m.Secret(ns, cred.name)
		if ca == nil || ca.CACert == nil {
			ca = m.Secret(ns, cred.name+credentialCASuffix)
		}
		if ca == nil || ca.CACert == nil {
			continue
		}
		seen[name] = true
		secrets = append(secrets, &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inlineBytes(ca.CACert),
		}}})
	}
	return secrets
}

// originationCredential is a credentialName of a DestinationRule's TLS origination, and
// whether a MUTUAL setting names it (its certificate is then needed too).
type originationCredential struct {
	name   string
	mutual bool
}

// originationCredentials returns the credentialNames of the SIMPLE and MUTUAL tls
// settings of every DestinationRule (rule-wide, per port, per subset), each once, in
// model order.
func originationCredentials(m *model.Model) []originationCredential {
	var out []originationCredential
	add := func(tls *networking.ClientTLSSettings) {
		mode := tls.GetMode()
		if (mode != networking.ClientTLSSettings_SIMPLE && mode != networking.ClientTLSSettings_MUTUAL) || tls.GetCredentialName() == "" {
			return
		}
		mutual := mode == networking.ClientTLSSettings_MUTUAL
		i := slices.IndexFunc(out, func(c originationCredential) bool { return c.name == tls.GetCredentialName() })
		if i < 0 {
			out = append(out, originationCredential{name: tls.GetCredentialName(), mutual: mutual})
		} else if mutual {
			out[i].mutual = true
		}
	}
	policy := func(tp *networking.TrafficPolicy) {
		add(tp.GetTls())
		for _, pl := range tp.GetPortLevelSettings() {
			add(pl.GetTls())
		}
	}
	for _, dr := range m.Istio.DestinationRules {
		policy(dr.Spec.GetTrafficPolicy())
		for _, s := range dr.Spec.GetSubsets() {
			policy(s.GetTrafficPolicy())
		}
	}
	return out
}
