package tlsctx

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3" // registers RawBuffer: Istio's tlsMode-disabled match carries it
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// TransportSocketName is the name of Envoy's TLS transport socket.
const TransportSocketName = "envoy.transport_sockets.tls"

// RawBufferName is the name of Envoy's plaintext transport socket.
const RawBufferName = "envoy.transport_sockets.raw_buffer"

// Source says where a secret comes from: a gRPC SDS stream to a static cluster (Istio's
// sds-grpc), or the ADS stream.
type Source struct {
	ADS     bool
	Cluster string
}

// Context is a compiled DownstreamTlsContext or UpstreamTlsContext. Immutable.
type Context struct {
	Server            bool
	CertSecret        string // tls_certificate_sds_secret_configs[0].name; "" for none
	ValidationSecret  string // validation_context_sds_secret_config.name; "" for none
	Sources           map[string]Source
	SANs              []SANMatcher
	ALPN              []string
	RequireClientCert bool   // downstream only
	SNI               string // upstream only
	MinVersion        uint16
	MaxVersion        uint16
	CipherSuites      []uint16 // tls_params.cipher_suites; nil: Go's defaults
}

// SecretNames returns the secrets the context needs before it can be used.
func (c *Context) SecretNames() []string {
	var out []string
	if c.CertSecret != "" {
		out = append(out, c.CertSecret)
	}
	if c.ValidationSecret != "" {
		out = append(out, c.ValidationSecret)
	}
	return out
}

// SANMatcher matches one subject alternative name, as Envoy's SubjectAltNameMatcher with a
// StringMatcher (exact or prefix). Type is "" (any of URI and DNS, as the deprecated
// match_subject_alt_names), "URI" or "DNS".
type SANMatcher struct {
	Type   string
	Exact  string
	Prefix string
}

func (m SANMatcher) match(v string) bool {
	if m.Exact != "" {
		return v == m.Exact
	}
	return strings.HasPrefix(v, m.Prefix)
}

var commonAllow = fieldcheck.Allow{
	"envoy.extensions.transport_sockets.tls.v3.CommonTlsContext": {
		"tls_params", "tls_certificate_sds_secret_configs", "validation_context_sds_secret_config",
		"combined_validation_context", "alpn_protocols",
	},
	"envoy.extensions.transport_sockets.tls.v3.TlsParameters":                                         {"tls_minimum_protocol_version", "tls_maximum_protocol_version", "cipher_suites"},
	"envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig":                                       {"name", "sds_config"},
	"envoy.extensions.transport_sockets.tls.v3.CommonTlsContext.CombinedCertificateValidationContext": {"default_validation_context", "validation_context_sds_secret_config"},
	"envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext":                          {"match_subject_alt_names", "match_typed_subject_alt_names"},
	"envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher":                                 {"san_type", "matcher"},
	"envoy.type.matcher.v3.StringMatcher":                                                             {"exact", "prefix"},
	"envoy.config.core.v3.ConfigSource":                                                               {"ads", "api_config_source", "resource_api_version", "initial_fetch_timeout"},
	"envoy.config.core.v3.ApiConfigSource":                                                            {"api_type", "grpc_services", "transport_api_version", "set_node_on_first_message_only"},
	"envoy.config.core.v3.GrpcService":                                                                {"envoy_grpc"},
	"envoy.config.core.v3.GrpcService.EnvoyGrpc":                                                      {"cluster_name"},
}

var downstreamAllow = fieldcheck.Allow{
	"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext": {"common_tls_context", "require_client_certificate"},
}.Merge(commonAllow)

var upstreamAllow = fieldcheck.Allow{
	"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext": {"common_tls_context", "sni"},
}.Merge(commonAllow)

// Compile compiles a listener's or cluster's transport_socket. It returns nil, nil for
// none or raw_buffer; server selects DownstreamTlsContext (listeners) over
// UpstreamTlsContext (clusters). Errors name the field relative to transport_socket.
func Compile(ts *corev3.TransportSocket, server bool) (*Context, error) {
	if ts == nil {
		return nil, nil
	}
	tc := ts.GetTypedConfig()
	if ts.GetName() == RawBufferName && tc == nil {
		return nil, nil
	}
	if tc == nil {
		return nil, fmt.Errorf("name: unsupported transport socket %s", ts.GetName())
	}
	if tc.MessageName() == "envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer" {
		return nil, nil
	}
	key, sni, ok := cacheKey(tc, server)
	if ok {
		if c := compiled.get(key); c != nil {
			cp := *c
			cp.SNI = sni
			return &cp, nil
		}
	}
	c, err := compile(tc, server)
	if err == nil && ok {
		compiled.put(key, c)
	}
	return c, err
}

// compile compiles a TLS context from its typed_config.
func compile(tc *anypb.Any, server bool) (*Context, error) {
	var common *tlsv3.CommonTlsContext
	c := &Context{Server: server, Sources: map[string]Source{}}
	if server {
		var d tlsv3.DownstreamTlsContext
		if err := unpack(tc, &d); err != nil {
			return nil, err
		}
		if err := downstreamAllow.Check(&d); err != nil {
			return nil, fmt.Errorf("typed_config.%w", err)
		}
		c.RequireClientCert = d.GetRequireClientCertificate().GetValue()
		common = d.GetCommonTlsContext()
	} else {
		var u tlsv3.UpstreamTlsContext
		if err := unpack(tc, &u); err != nil {
			return nil, err
		}
		if err := upstreamAllow.Check(&u); err != nil {
			return nil, fmt.Errorf("typed_config.%w", err)
		}
		c.SNI = u.GetSni()
		common = u.GetCommonTlsContext()
	}
	if err := c.fillCommon(common); err != nil {
		return nil, fmt.Errorf("typed_config.common_tls_context.%w", err)
	}
	return c, nil
}

// compiled holds compiled contexts by what they were compiled from (see cacheKey), so
// that the clusters of a sidecar, whose ISTIO_MUTUAL contexts differ only in their SNI,
// unpack, validate and check one context and share its secrets, SANs and ALPN.
var compiled = &contextCache{m: map[string]*Context{}}

// maxCachedContexts bounds the cache; when full it starts again.
const maxCachedContexts = 512

type contextCache struct {
	mu sync.Mutex
	m  map[string]*Context
}

func (cc *contextCache) get(key string) *Context {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.m[key]
}

func (cc *contextCache) put(key string, c *Context) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.m) >= maxCachedContexts {
		clear(cc.m)
	}
	cc.m[key] = c
}

// upstreamSNIField is UpstreamTlsContext.sni's field number.
const upstreamSNIField = 2

// cacheKey returns the key of a typed_config in the cache and, for an
// UpstreamTlsContext, its SNI: a DownstreamTlsContext is keyed by its bytes, an
// UpstreamTlsContext by its bytes without sni, which no other field's compilation reads
// (a hit copies the cached context with this SNI). It reports false when the bytes are
// not a well-formed message or the SNI is one that unpacking or validation would refuse:
// those are compiled in full, so that their errors are Compile's.
func cacheKey(tc *anypb.Any, server bool) (key, sni string, ok bool) {
	if server {
		if tc.MessageName() != "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext" {
			return "", "", false
		}
		return "d" + string(tc.GetValue()), "", true
	}
	if tc.MessageName() != "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" {
		return "", "", false
	}
	b := tc.GetValue()
	var rest []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return "", "", false
		}
		if num == upstreamSNIField {
			v, k := protowire.ConsumeBytes(b[n:])
			if typ != protowire.BytesType || k < 0 {
				return "", "", false
			}
			sni = string(v) // the last one counts, as in unmarshalling
		} else {
			rest = append(rest, b[:n+m]...)
		}
		b = b[n+m:]
	}
	if !utf8.ValidString(sni) || (&tlsv3.UpstreamTlsContext{Sni: sni}).ValidateAll() != nil {
		return "", "", false
	}
	return "u" + string(rest), sni, true
}

func unpack(tc *anypb.Any, m interface {
	proto.Message
	ValidateAll() error
}) error {
	want := m.ProtoReflect().Descriptor().FullName()
	if tc.MessageName() != want {
		return fmt.Errorf("typed_config: unsupported type %s (want %s)", tc.MessageName(), want)
	}
	if err := tc.UnmarshalTo(m); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if err := m.ValidateAll(); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	return nil
}

func (c *Context) fillCommon(common *tlsv3.CommonTlsContext) error {
	if common == nil {
		return nil
	}
	c.ALPN = append([]string(nil), common.GetAlpnProtocols()...)
	var err error
	if c.MinVersion, err = tlsVersion(common.GetTlsParams().GetTlsMinimumProtocolVersion(), tls.VersionTLS12); err != nil {
		return fmt.Errorf("tls_params.tls_minimum_protocol_version: %w", err)
	}
	if c.MaxVersion, err = tlsVersion(common.GetTlsParams().GetTlsMaximumProtocolVersion(), tls.VersionTLS13); err != nil {
		return fmt.Errorf("tls_params.tls_maximum_protocol_version: %w", err)
	}
	if c.CipherSuites, err = compileCipherSuites(common.GetTlsParams().GetCipherSuites()); err != nil {
		return err
	}
	certs := common.GetTlsCertificateSdsSecretConfigs()
	if len(certs) > 1 {
		return errors.New("tls_certificate_sds_secret_configs: only one certificate is supported")
	}
	if len(certs) == 1 {
		src, err := source(certs[0])
		if err != nil {
			return fmt.Errorf("tls_certificate_sds_secret_configs[0].%w", err)
		}
		c.CertSecret = certs[0].GetName()
		c.Sources[c.CertSecret] = src
	}
	vsds := common.GetValidationContextSdsSecretConfig()
	var def *tlsv3.CertificateValidationContext
	if cv := common.GetCombinedValidationContext(); cv != nil {
		vsds, def = cv.GetValidationContextSdsSecretConfig(), cv.GetDefaultValidationContext()
	}
	if vsds != nil {
		src, err := source(vsds)
		if err != nil {
			return fmt.Errorf("validation_context_sds_secret_config.%w", err)
		}
		c.ValidationSecret = vsds.GetName()
		c.Sources[c.ValidationSecret] = src
	}
	for _, m := range def.GetMatchSubjectAltNames() { //nolint:staticcheck // Envoy still honours this deprecated field, so the stand-in must too
		c.SANs = append(c.SANs, stringMatcher("", m))
	}
	for _, m := range def.GetMatchTypedSubjectAltNames() {
		switch m.GetSanType() {
		case tlsv3.SubjectAltNameMatcher_URI:
			c.SANs = append(c.SANs, stringMatcher("URI", m.GetMatcher()))
		case tlsv3.SubjectAltNameMatcher_DNS:
			c.SANs = append(c.SANs, stringMatcher("DNS", m.GetMatcher()))
		default:
			return fmt.Errorf("combined_validation_context.default_validation_context.match_typed_subject_alt_names: san_type %s is not supported by meshlab proxy", m.GetSanType())
		}
	}
	if len(c.SANs) > 0 && c.ValidationSecret == "" {
		return errors.New("combined_validation_context: SAN matchers need a trusted CA (validation_context_sds_secret_config)")
	}
	return nil
}

func stringMatcher(typ string, m *matcherv3.StringMatcher) SANMatcher {
	return SANMatcher{Type: typ, Exact: m.GetExact(), Prefix: m.GetPrefix()}
}

func source(s *tlsv3.SdsSecretConfig) (Source, error) {
	cs := s.GetSdsConfig()
	switch {
	case cs == nil:
		return Source{}, errors.New("sds_config: required (static secrets are not supported by meshlab proxy)")
	case cs.GetAds() != nil:
		return Source{ADS: true}, nil
	case cs.GetApiConfigSource() != nil:
		api := cs.GetApiConfigSource()
		if api.GetApiType() != corev3.ApiConfigSource_GRPC {
			return Source{}, fmt.Errorf("sds_config.api_config_source.api_type: %s is not supported by meshlab proxy (GRPC only)", api.GetApiType())
		}
		gs := api.GetGrpcServices()
		if len(gs) != 1 || gs[0].GetEnvoyGrpc().GetClusterName() == "" {
			return Source{}, errors.New("sds_config.api_config_source.grpc_services: exactly one envoy_grpc cluster is supported")
		}
		return Source{Cluster: gs[0].GetEnvoyGrpc().GetClusterName()}, nil
	}
	return Source{}, errors.New("sds_config: only ads and api_config_source are supported")
}

func tlsVersion(v tlsv3.TlsParameters_TlsProtocol, def uint16) (uint16, error) {
	switch v {
	case tlsv3.TlsParameters_TLS_AUTO:
		return def, nil
	case tlsv3.TlsParameters_TLSv1_2:
		return tls.VersionTLS12, nil
	case tlsv3.TlsParameters_TLSv1_3:
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("%s is not supported by meshlab proxy", v)
}
