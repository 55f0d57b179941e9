package model

import (
	"net/netip"
	"slices"
	"strconv"

	extensions "istio.io/api/extensions/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	telemetry "istio.io/api/telemetry/v1alpha1"
)

// IstioConfig is one validated Istio object of the mesh, its spec in istio.io/api's types.
type IstioConfig[T any] struct {
	Name      string
	Namespace string
	Spec      T
	Origin    Origin
	// Labels are the object's metadata.labels (kept for ServiceEntries, which
	// istio.io/use-waypoint attaches to a waypoint).
	Labels map[string]string
	// Annotations are the object's metadata.annotations (kept for AuthorizationPolicies,
	// whose istio.io/dry-run istiod reads).
	Annotations map[string]string
}

// DryRunAnnotation puts an AuthorizationPolicy in dry-run mode: istiod sends its rules to
// the proxies as the RBAC filter's shadow rules, evaluated and logged, never enforced.
const DryRunAnnotation = "istio.io/dry-run"

// DryRun reports whether the object's istio.io/dry-run annotation is true, as istiod's
// authz builder reads it (strconv.ParseBool; a value it cannot parse is not dry-run:
// istiod logs the error and enforces the policy, though its validation refuses such a
// value on apply, as meshlab's loader does).
func (c *IstioConfig[T]) DryRun() bool {
	v, ok := c.Annotations[DryRunAnnotation]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// OutboundTrafficPolicy is the mesh's outboundTrafficPolicy.mode.
type OutboundTrafficPolicy int

// Outbound traffic policies, as Istio's MeshConfig.
const (
	AllowAny     OutboundTrafficPolicy = iota // unknown destinations pass through (PassthroughCluster)
	RegistryOnly                              // unknown destinations are refused (BlackHoleCluster)
)

// String returns the policy as Istio spells it.
func (p OutboundTrafficPolicy) String() string {
	if p == RegistryOnly {
		return "REGISTRY_ONLY"
	}
	return "ALLOW_ANY"
}

// MeshConfig holds the lab-wide settings Istio keeps in its MeshConfig.
type MeshConfig struct {
	OutboundTrafficPolicy OutboundTrafficPolicy
	// RootNamespace is the namespace whose PeerAuthentication and AuthorizationPolicy
	// objects (without a selector) apply to the whole mesh. "" means DefaultRootNamespace.
	RootNamespace string

	// AccessLogOff turns every proxy's access log off (MeshConfig accessLogFile: "").
	AccessLogOff bool
	// AccessLogFile is the file every proxy writes its access log to, as Istio's
	// accessLogFile; "" means DefaultAccessLogFile. /dev/stdout is the proxy's stdout.
	AccessLogFile string
	// AccessLogEncoding is Istio's accessLogEncoding.
	AccessLogEncoding AccessLogEncoding
	// AccessLogFormat is Istio's accessLogFormat: an Envoy format string (TEXT) or a JSON
	// object of format strings (JSON); "" means Istio's default format of the encoding.
	AccessLogFormat string

	// TrustDomain is Istio's trustDomain: the SPIFFE trust domain of the workload
	// identities the CA issues and the generator names; "" means DefaultTrustDomain.
	TrustDomain string
	// TrustDomainAliases are Istio's trustDomainAliases: trust domains whose identities
	// the mesh treats as its own (policies naming them match the current ones, peers
	// holding them are accepted), in the order written.
	TrustDomainAliases []string

	// MeshMTLSMinTLS13 is Istio's meshMTLS.minProtocolVersion TLSV1_3: the sidecars'
	// inbound mTLS accepts TLS 1.3 only; off (TLS_AUTO, TLSV1_2), TLS 1.2 and 1.3, as
	// istiod's BuildInboundTLS (the setting does not reach outbound mTLS, as in Istio).
	MeshMTLSMinTLS13 bool

	// DNSCertificates are Istio's meshConfig.certificates: DNS certificates istiod
	// provisions into Secrets of the Istio namespace (the DNS certificates page).
	DNSCertificates []DNSCertificate

	// TLSOnSidecarIngress is istiod's ENABLE_TLS_ON_SIDECAR_INGRESS (values.pilot.env,
	// set by install): a Sidecar's ingress tls terminates TLS on the sidecar's inbound
	// port; off, istiod ignores ingress tls, and so does the generator.
	TLSOnSidecarIngress bool

	// Tracing is enableTracing, defaultConfig.tracing and the zipkin
	// extensionProviders (tracing.go).
	Tracing MeshTracing

	// OTelAccessLogProviders are the extensionProviders with envoyOtelAls, in the order
	// written; DefaultAccessLogProviders is defaultProviders.accessLogging ("envoy" is the
	// built-in file provider).
	OTelAccessLogProviders    []OTelAccessLogProvider
	DefaultAccessLogProviders []string
	// AccessLogProviders is set for one proxy by xds.MeshFor: the providers its access
	// log goes to, as the Telemetry API (or defaultProviders) decides; nil: the mesh's
	// accessLogFile alone, as without either.
	AccessLogProviders []string
}

// EnvoyAccessLogProvider is Istio's built-in access log provider: the file log to
// /dev/stdout.
const EnvoyAccessLogProvider = "envoy"

// OTelAccessLogProvider is an extension provider with envoyOtelAls: an OpenTelemetry
// collector the proxies send their access log to.
type OTelAccessLogProvider struct {
	Name    string
	Service string // the collector's service host, e.g. opentelemetry-collector.istio-system.svc.cluster.local
	Port    uint16
	LogName string // "": istiod's otel_envoy_accesslog
	// Format is logFormat.text ("": Istio's text format); Labels are logFormat.labels,
	// the records' attributes (format strings).
	Format string
	Labels map[string]string
}

// OTelAccessLogProvider returns the envoyOtelAls provider named name.
func (m MeshConfig) OTelAccessLogProvider(name string) (OTelAccessLogProvider, bool) {
	for _, p := range m.OTelAccessLogProviders {
		if p.Name == name {
			return p, true
		}
	}
	return OTelAccessLogProvider{}, false
}

// DNSCertificate is one of meshConfig.certificates: a certificate for DNSNames kept in
// the Secret SecretName of the Istio namespace.
type DNSCertificate struct {
	SecretName string
	DNSNames   []string
}

// Domain returns the mesh's trust domain, defaulted.
func (m MeshConfig) Domain() string {
	if m.TrustDomain == "" {
		return DefaultTrustDomain
	}
	return m.TrustDomain
}

// TrustDomains returns the trust domain, then its aliases, without repeats: the list
// istiod validates peers against (TrustDomainsForValidation) and rewrites policy
// principals to (its trust domain bundle).
func (m MeshConfig) TrustDomains() []string {
	out := []string{m.Domain()}
	for _, a := range m.TrustDomainAliases {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// AccessLogEncoding is the mesh's accessLogEncoding.
type AccessLogEncoding int

// Access log encodings, as Istio's MeshConfig.
const (
	AccessLogText AccessLogEncoding = iota // TEXT: one Envoy format string per line
	AccessLogJSON                          // JSON: one JSON object per line
)

// String returns the encoding as Istio spells it.
func (e AccessLogEncoding) String() string {
	if e == AccessLogJSON {
		return "JSON"
	}
	return "TEXT"
}

// DefaultAccessLogFile is meshlab's default accessLogFile: access logs are on and go to
// the proxy's stdout, as in Istio's demo profile (meshlab is for learning).
const DefaultAccessLogFile = "/dev/stdout"

// AccessLogPath returns the file proxies write access logs to, defaulted; "" when access
// logs are off.
func (m MeshConfig) AccessLogPath() string {
	switch {
	case m.AccessLogOff:
		return ""
	case m.AccessLogFile == "":
		return DefaultAccessLogFile
	}
	return m.AccessLogFile
}

// DefaultRootNamespace is Istio's default mesh root namespace.
const DefaultRootNamespace = "istio-system"

// Root returns the mesh root namespace, defaulted.
func (m MeshConfig) Root() string {
	if m.RootNamespace == "" {
		return DefaultRootNamespace
	}
	return m.RootNamespace
}

// Istio holds the Istio networking objects of a model, each list sorted by namespace, then
// name. The xds generator reads them; the config loader fills them.
type Istio struct {
	VirtualServices  []*IstioConfig[*networking.VirtualService]
	DestinationRules []*IstioConfig[*networking.DestinationRule]
	ServiceEntries   []*IstioConfig[*networking.ServiceEntry]
	// Gateways are the networking.istio.io Gateways (see gateway.go).
	Gateways []*IstioConfig[*networking.Gateway]

	// Security objects (security.istio.io; v1beta1 and v1 share one schema).
	PeerAuthentications   []*IstioConfig[*security.PeerAuthentication]
	AuthorizationPolicies []*IstioConfig[*security.AuthorizationPolicy]
	// RequestAuthentications carry the JWT rules (jwtRules) of the workloads they select.
	RequestAuthentications []*IstioConfig[*security.RequestAuthentication]
	// Telemetries are telemetry.istio.io Telemetry objects: their access logging (the
	// built-in provider envoy, on or disabled) decides the access log of the proxies
	// they select (xds.MeshFor).
	Telemetries []*IstioConfig[*telemetry.Telemetry]
	// Sidecars are networking.istio.io Sidecar objects: their ingress listeners replace
	// the inbound ports of the pods they select (xds.SidecarFor).
	Sidecars []*IstioConfig[*networking.Sidecar]
	// TrafficExtensions are extensions.istio.io TrafficExtensions: their Lua filters go
	// into the HTTP chains of the gateways and waypoints they target
	// (xds/trafficextension.go).
	TrafficExtensions []*IstioConfig[*extensions.TrafficExtension]
	// JWKS holds the key sets fetched for jwksUri values, by URI, as istiod resolves
	// them before generating (the lab fills it; a URI without an entry fails closed).
	JWKS map[string]string
	// AutoAddresses are the addresses istiod's IP autoallocator gave the hosts of the
	// ServiceEntries without addresses (entryaddress.go).
	AutoAddresses map[EntryHost]netip.Addr
}
