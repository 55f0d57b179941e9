// Package model holds the mesh as the control plane sees it: services with their
// virtual IPs, pods with their addresses and labels, and the endpoints that join them.
//
// A Model is built once from validated scenario objects (see controlplane/config) and is
// read-only afterwards: every consumer (xds generation, the DNS name table, the lab) may
// share one Model between goroutines without locking. A change to the mesh builds a new
// Model.
package model

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// DefaultClusterDomain is the DNS suffix of service hostnames, as in Kubernetes.
const DefaultClusterDomain = "cluster.local"

// DefaultTrustDomain is the SPIFFE trust domain of workload identities, as in Istio.
const DefaultTrustDomain = "cluster.local"

// Protocol is the application protocol of a service port, chosen as Istio does: from the
// port's appProtocol, else from the prefix of its name (http, http2, grpc, tcp...).
type Protocol int

// Protocols meshlab knows. ProtocolHTTP is the zero value (a port built in code with no
// protocol); a Service port whose appProtocol and name say nothing is ProtocolAuto.
const (
	ProtocolHTTP Protocol = iota
	ProtocolHTTP2
	ProtocolGRPC
	ProtocolTCP
	// ProtocolTLS and ProtocolHTTPS are opaque bytes to a sidecar, as TCP, told apart
	// only by the SNI of the client's TLS handshake (istiod's Protocol.IsTLS).
	ProtocolTLS
	ProtocolHTTPS
	// ProtocolAuto is a port of no declared protocol (no appProtocol, a name without a
	// known prefix, or no name): istiod's protocol.Unsupported, which sidecars sniff.
	// Their listeners detect HTTP with the HTTP inspector (HTTP/1.1 or h2c goes to an
	// HTTP connection manager) and pass anything else through as TCP.
	ProtocolAuto
)

// String returns the protocol's name as Istio spells it.
func (p Protocol) String() string {
	switch p {
	case ProtocolHTTP:
		return "HTTP"
	case ProtocolHTTP2:
		return "HTTP2"
	case ProtocolGRPC:
		return "GRPC"
	case ProtocolTCP:
		return "TCP"
	case ProtocolTLS:
		return "TLS"
	case ProtocolHTTPS:
		return "HTTPS"
	case ProtocolAuto:
		return "UnsupportedProtocol" // istiod's protocol.Unsupported
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// IsHTTP reports whether the protocol is served by an HTTP connection manager.
func (p Protocol) IsHTTP() bool { return p == ProtocolHTTP || p == ProtocolHTTP2 || p == ProtocolGRPC }

// IsAuto reports whether the port's protocol is sniffed (see ProtocolAuto).
func (p Protocol) IsAuto() bool { return p == ProtocolAuto }

// IsHTTPOrSniffed reports whether a port may carry HTTP to an HTTP connection manager: an
// HTTP port, or a sniffed one when HTTP is detected.
func (p Protocol) IsHTTPOrSniffed() bool { return p.IsHTTP() || p == ProtocolAuto }

// IsTLS reports whether the port carries the client's own TLS (TLS or HTTPS), which a
// sidecar routes by SNI without terminating it.
func (p Protocol) IsTLS() bool { return p == ProtocolTLS || p == ProtocolHTTPS }

// ServicePort is one port of a Service.
type ServicePort struct {
	Name       string
	Port       uint16 // the port clients dial on the service VIP
	TargetPort uint16 // the port the pod's app listens on
	Protocol   Protocol
	// AppProtocol is the port's appProtocol as written ("" when none): Protocol is
	// meshlab's choice for every port, while istiod's ambient index classifies the port
	// from its name and appProtocol alone, leaving an unnamed port UNKNOWN.
	AppProtocol string
}

// Service is a Kubernetes-style Service: a stable virtual IP and name in front of the pods
// its selector matches.
type Service struct {
	Name      string
	Namespace string
	VIP       netip.Addr
	Ports     []ServicePort
	Selector  map[string]string
	// Labels are the Service's own labels (istio.io/use-waypoint and the deployment
	// controller's labels on a waypoint's Service).
	Labels map[string]string
	// Origin is where the object came from, for error messages and xDS metadata.
	Origin Origin
	// Host is set on the service a waypoint makes of one ServiceEntry host (Name is the
	// ServiceEntry's): the hostname it serves, e.g. "httpbin.org".
	Host string
}

// Hostname returns the service's fully qualified name, e.g.
// "backend.default.svc.cluster.local" (a ServiceEntry host's: the host).
func (s *Service) Hostname() string {
	if s.Host != "" {
		return s.Host
	}
	return s.Name + "." + s.Namespace + ".svc." + DefaultClusterDomain
}

// Selects reports whether the service's selector matches the given labels. An empty
// selector matches nothing, as in Kubernetes (such a service has manual endpoints).
func (s *Service) Selects(labels map[string]string) bool {
	if len(s.Selector) == 0 {
		return false
	}
	for k, v := range s.Selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// AppSpec says what runs as the pod's application.
type AppSpec struct {
	// Command, when set, is run instead of the built-in demo app (argv, no shell).
	Command []string
	// Upstreams are URLs the built-in demo app calls on every request it serves.
	Upstreams []string
	// StartupCalls are URLs the built-in demo app calls once when it starts.
	StartupCalls []string
	// ErrorRate, ErrorCode and Latency are the demo app's injected faults: the fraction
	// of requests it fails, their status (0 = the app's default) and a delay on every
	// answer.
	ErrorRate float64
	ErrorCode int
	Latency   time.Duration
	// Image is the container image a Kubernetes workload named ("" for a Workload);
	// Persona is the built-in app's persona it selects ("" for the demo app itself), and
	// ImageNote says what runs when meshlab does not know the image.
	Image, Persona, ImageNote string
	// Args are the container's args, which some personas read as their image does.
	Args []string
	// Files are what the container's Secret and ConfigMap volumes hold, each at the
	// path the container would see it (mountPath and key), in path order; the nginx
	// persona reads its nginx.conf and certificates from them.
	Files []File
	// EmptyDirs are the container's mounts of the pod's emptyDir volumes, in the
	// container's order.
	EmptyDirs []EmptyDir
}

// EmptyDir is a container's mount of one of its pod's emptyDir volumes: a directory
// every container mounting the volume shares (the secure-metrics sample's istio-certs,
// which the sidecar writes with OUTPUT_CERTS and Prometheus reads).
type EmptyDir struct {
	Volume string // the volume's name
	Path   string // its mountPath in the container, clean and absolute
}

// File is one file of a pod's volumes: its absolute path in the container and content.
type File struct {
	Path string
	Data []byte
}

// SidecarSpec holds the pod's proxy settings, as Istio's sidecar annotations do.
type SidecarSpec struct {
	// Inject reports whether the pod gets a sidecar and capture rules.
	Inject bool
	// Tracing is the tracing of the pod's proxy.istio.io/config annotation, which
	// replaces the mesh's defaultConfig.tracing for this proxy (MeshTracing.For); nil
	// when the annotation names none.
	Tracing *ProxyTracing
	// HoldApplicationUntilProxyStarts delays the app until the proxy is ready.
	HoldApplicationUntilProxyStarts bool
	// LogLevel is the proxy's log level ("" means info).
	LogLevel string
	// ProxyPath pins the pod's Envoy binary ("" = the lab's choice).
	ProxyPath string
	// Concurrency is the proxy's worker threads (0 = the agent's default).
	Concurrency int
	// DrainDuration and ParentShutdownDuration are the proxy's --drain-time-s and
	// --parent-shutdown-time-s (0 = the agent's defaults).
	DrainDuration, ParentShutdownDuration time.Duration
	// DataPlane is "envoy", "meshlab" (the built-in proxy) or "" (the agent's choice).
	DataPlane string
	// BootstrapOverride is a validated JSON fragment of an Envoy Bootstrap merged into
	// the proxy's bootstrap ("" = none).
	BootstrapOverride string
	// GRPCAgent reports whether the pod is injected with Istio's grpc-agent template
	// (annotation inject.istio.io/templates: grpc-agent): proxyless gRPC, the agent
	// without a proxy or capture, the app talking xDS itself with the gRPC generator's
	// resources (controlplane/xds/grpc.go). Meaningful only with Inject.
	GRPCAgent bool
	// AppMetricsPort and AppMetricsPath are where the app serves its own Prometheus
	// metrics (the pod's prometheus.io annotations), which the agent merges with the
	// proxy's on its status port, as pilot-agent does; 0 for none.
	AppMetricsPort uint16
	AppMetricsPath string
	// Files are what the istio-proxy container's user volumes hold (the pod's
	// sidecar.istio.io/userVolume and userVolumeMount annotations: Secret and ConfigMap
	// volumes), each at its path in that container: the agent serves the certificate
	// files a Sidecar's ingress TLS names from them, as pilot-agent reads its mounts.
	Files []File
	// EmptyDirs are the istio-proxy container's mounts of the pod's emptyDir volumes
	// (userVolumeMount naming a volume of the pod or an emptyDir userVolume).
	EmptyDirs []EmptyDir
	// OutputCerts is proxyMetadata.OUTPUT_CERTS of the pod's proxy.istio.io/config: the
	// directory of the istio-proxy container where the agent writes the workload's
	// key.pem, cert-chain.pem and root-cert.pem, as pilot-agent does; "" for none.
	OutputCerts string
	// SecureMetricsPort and SecureMergedMetricsPort are proxyMetadata's
	// ENVOY_SECURE_METRICS_PORT and ENVOY_SECURE_MERGED_METRICS_PORT: the proxy's mTLS
	// listeners of its stats and of the merged metrics (0: none). MetricsLocalhostOnly is
	// METRICS_LOCALHOST_ACCESS_ONLY=true: 15090 and the status port's metrics for the
	// pod's loopback only.
	SecureMetricsPort, SecureMergedMetricsPort uint16
	MetricsLocalhostOnly                       bool
}

// WithoutProxySettings returns s without the settings a running proxy takes in a new
// epoch (log level, concurrency, drain times, data plane, binary, bootstrap override):
// a running lab can apply a change of those, not of the rest.
func (s SidecarSpec) WithoutProxySettings() SidecarSpec {
	// The sidecar's volume files are left out: a Secret changed or deleted later does not
	// make the pod again (Kubernetes keeps a pod whose Secret changes); the agent keeps
	// the files written when the pod started.
	return SidecarSpec{Inject: s.Inject, HoldApplicationUntilProxyStarts: s.HoldApplicationUntilProxyStarts, GRPCAgent: s.GRPCAgent}
}

// Pod is one pseudo-pod: a network namespace with an address, an app and (usually) a
// sidecar.
type Pod struct {
	Name      string
	Namespace string
	Workload  string // the Workload object this pod was made from
	Labels    map[string]string
	// Annotations are the pod's annotations (its template's, as Kubernetes copies them),
	// plus those the lab sets on a running pod (ambient.istio.io/redirection).
	Annotations    map[string]string
	ServiceAccount string
	IP             netip.Addr
	// Ports are the container ports the app listens on.
	Ports   []uint16
	App     AppSpec
	Sidecar SidecarSpec
	Origin  Origin
	// Router reports whether the pod is a standalone gateway (Istio's router node type,
	// see gateway.go): its proxy is the pod's only process and nothing is captured.
	Router bool
	// Waypoint reports whether the pod is a waypoint's (see waypoint.go): a Router pod
	// whose proxy runs with node type waypoint, configured by istiod's waypoint
	// generator, never by the Gateways that select router pods.
	Waypoint bool
}

// NodeID returns the proxy's xDS node id, shaped like Istio's:
// "sidecar~10.44.0.2~backend-v1.default~default.svc.cluster.local", "router~..." for a
// gateway, "waypoint~..." for a waypoint.
func (p *Pod) NodeID() string {
	return fmt.Sprintf("%s~%s~%s.%s~%s.svc.%s", p.nodeType(), p.IP, p.Name, p.Namespace, p.Namespace, DefaultClusterDomain)
}

func (p *Pod) nodeType() string {
	if p.Waypoint {
		return "waypoint"
	}
	if p.Router {
		return "router"
	}
	return "sidecar"
}

// ServiceCluster returns the proxy's --service-cluster, "<workload app>.<namespace>" as
// Istio derives it from the app label (falling back to the workload name).
func (p *Pod) ServiceCluster() string {
	app := p.Labels["app"]
	if app == "" {
		app = p.Workload
	}
	return app + "." + p.Namespace
}

// SpiffeID returns the pod's workload identity.
func (p *Pod) SpiffeID(trustDomain string) string {
	return "spiffe://" + trustDomain + "/ns/" + p.Namespace + "/sa/" + p.ServiceAccount
}

// Endpoint is one address serving a service port.
type Endpoint struct {
	Pod  *Pod
	Addr netip.AddrPort
}

// Origin records the file and object a model element came from.
type Origin struct {
	File      string
	Kind      string
	Namespace string
	Name      string
}

// String renders the origin as "file: Kind namespace/name".
func (o Origin) String() string {
	s := o.Kind + " " + o.Namespace + "/" + o.Name
	if o.File != "" {
		s = o.File + ": " + s
	}
	return s
}

// Model is the whole mesh of one lab. Build it with New; it is read-only afterwards.
type Model struct {
	Services []*Service // sorted by namespace, then name
	Pods     []*Pod     // sorted by namespace, then name
	// Istio is the mesh's Istio networking config; Mesh its mesh-wide settings. Both are
	// set by the config loader after New and read-only afterwards.
	Istio Istio
	Mesh  MeshConfig
	// Secrets are the TLS Secrets gateways serve by credentialName (see gateway.go), set
	// by the config loader after New.
	Secrets []*Secret
	// Namespaces are the scenario's declared Namespace objects, sorted by name (see
	// ambient.go), set by the config loader after New.
	Namespaces []*Namespace
	// Waypoints are the Gateways of class istio-waypoint, sorted by namespace, then
	// name (see waypoint.go), set by the config loader after New.
	Waypoints []*Waypoint
	// ExternalNames are the Services of type ExternalName, sorted by namespace, then
	// name, set by the config loader after New: DNS aliases (no address, no pods), which
	// the proxies reach as istiod's DNS-resolved service of the target.
	ExternalNames []*ExternalName
}

// ExternalName is a Service of type ExternalName: its names are an alias of Target, as
// kube-dns answers them (a CNAME).
type ExternalName struct {
	Name, Namespace string
	Target          string // spec.externalName, lowercase, no trailing dot
	Ports           []ServicePort
	Origin          Origin // the Service's
}

// Hostname returns the alias's FQDN, "<name>.<ns>.svc.cluster.local".
func (e *ExternalName) Hostname() string {
	return e.Name + "." + e.Namespace + ".svc." + DefaultClusterDomain
}

// Aliases returns the names a pod in namespace ns resolves to an ExternalName's target,
// as NameTable's forms of a Service's names: its FQDN, "name.ns", "name.ns.svc", and the
// bare name in its own namespace; each maps to the lowercase target.
func (m *Model) Aliases(ns string) map[string]string {
	out := map[string]string{}
	for _, e := range m.ExternalNames {
		names := []string{e.Hostname(), e.Name + "." + e.Namespace, e.Name + "." + e.Namespace + ".svc"}
		if e.Namespace == ns {
			names = append(names, e.Name)
		}
		for _, n := range names {
			out[n] = e.Target
		}
	}
	return out
}

// New returns a model over the given services and pods, sorted for deterministic output.
func New(services []*Service, pods []*Pod) *Model {
	m := &Model{Services: append([]*Service(nil), services...), Pods: append([]*Pod(nil), pods...)}
	sort.Slice(m.Services, func(i, j int) bool {
		a, b := m.Services[i], m.Services[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	sort.Slice(m.Pods, func(i, j int) bool {
		a, b := m.Pods[i], m.Pods[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return m
}

// DefaultNamespace is the namespace of objects that name none, kubectl's current
// namespace.
const DefaultNamespace = "default"

// PodKey returns the one string that names pod namespace/name in a lab, as istioctl
// names a pod: "<name>" in namespace default, "<name>.<namespace>" elsewhere. Pod and
// namespace names are DNS labels (no '.'), so keys are unique; a key names the pod's
// network namespace (ml-<lab>-<key>), run directory, agent and API paths, as pod names
// may repeat across namespaces.
func PodKey(namespace, name string) string {
	if namespace == DefaultNamespace || namespace == "" {
		return name
	}
	return name + "." + namespace
}

// Key returns the pod's key (PodKey).
func (p *Pod) Key() string { return PodKey(p.Namespace, p.Name) }

// Pod returns the pod ref names, or nil (see LookupPod).
func (m *Model) Pod(ref string) *Pod {
	p, _ := m.LookupPod(ref)
	return p
}

// LookupPod returns the pod ref names: "<name>.<namespace>" (istioctl's form, also for
// default), else a name, as kubectl reads one in namespace default, or, when default has
// no pod of that name, the one pod of that name in the lab. A name that several other
// namespaces hold is an *AmbiguousPodError; an unknown one is (nil, nil).
func (m *Model) LookupPod(ref string) (*Pod, error) {
	if name, ns, ok := strings.Cut(ref, "."); ok {
		for _, p := range m.Pods {
			if p.Name == name && p.Namespace == ns {
				return p, nil
			}
		}
		return nil, nil
	}
	var found []*Pod
	for _, p := range m.Pods {
		if p.Name != ref {
			continue
		}
		if p.Namespace == DefaultNamespace {
			return p, nil
		}
		found = append(found, p)
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	e := &AmbiguousPodError{Name: ref}
	for _, p := range found {
		e.Namespaces = append(e.Namespaces, p.Namespace)
	}
	slices.Sort(e.Namespaces)
	return nil, e
}

// AmbiguousPodError is a pod name that several namespaces hold, none of them default.
type AmbiguousPodError struct {
	Name       string
	Namespaces []string
}

func (e *AmbiguousPodError) Error() string {
	return fmt.Sprintf("pod %q is in namespaces %s: choose one with -n NAMESPACE (or name it %s.%s)", e.Name, strings.Join(e.Namespaces, ", "), e.Name, e.Namespaces[0])
}

// Endpoints returns the addresses serving port of svc: every pod in the service's
// namespace that the selector matches, at the port's target port, in pod order.
func (m *Model) Endpoints(svc *Service, port ServicePort) []Endpoint {
	var eps []Endpoint
	for _, p := range m.Pods {
		if p.Namespace != svc.Namespace || !svc.Selects(p.Labels) {
			continue
		}
		eps = append(eps, Endpoint{Pod: p, Addr: netip.AddrPortFrom(p.IP, port.TargetPort)})
	}
	return eps
}

// ServicesFor returns the services whose selector matches the pod.
func (m *Model) ServicesFor(p *Pod) []*Service {
	var out []*Service
	for _, s := range m.Services {
		if s.Namespace == p.Namespace && s.Selects(p.Labels) {
			out = append(out, s)
		}
	}
	return out
}

// NameTable returns the DNS names a pod in namespace ns can resolve, each mapped to the
// addresses behind it, as Istio's DNS proxy name table does: for every service the FQDN
// "name.ns.svc.cluster.local" everywhere, plus "name.ns", "name.ns.svc" and, for services
// in the pod's own namespace, the bare "name"; for every ServiceEntry exported to ns, each
// host that is not a wildcard, mapped to spec.addresses (IPs, or /32 CIDRs) when it has
// any; a host without addresses is left to the upstream resolver, as Istio does without
// address auto-allocation. Names are lowercase and carry no trailing dot.
func (m *Model) NameTable(ns string) map[string][]netip.Addr {
	t := make(map[string][]netip.Addr)
	add := func(name string, a netip.Addr) {
		name = strings.TrimSuffix(strings.ToLower(name), ".")
		if !slices.Contains(t[name], a) {
			t[name] = append(t[name], a)
		}
	}
	for _, s := range m.Services {
		names := []string{s.Hostname(), s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc"}
		if s.Namespace == ns {
			names = append(names, s.Name)
		}
		for _, n := range names {
			add(n, s.VIP)
		}
	}
	for _, se := range m.Istio.ServiceEntries {
		if se.Spec == nil || !exportedTo(se.Spec.GetExportTo(), se.Namespace, ns) {
			continue
		}
		addrs := entryAddresses(se.Spec.GetAddresses())
		if len(addrs) == 0 {
			continue
		}
		for _, h := range se.Spec.GetHosts() {
			if strings.HasPrefix(h, "*") {
				continue // a wildcard names no single host to answer for
			}
			for _, a := range addrs {
				add(h, a)
			}
		}
	}
	return t
}

// entryAddresses returns a ServiceEntry's addresses that name one host: IPs and /32 (or
// /128) CIDRs. A wider CIDR is a range to route, not an answer to a DNS query.
func entryAddresses(addresses []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range addresses {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		} else if p, err := netip.ParsePrefix(s); err == nil && p.IsSingleIP() {
			out = append(out, p.Addr())
		}
	}
	return out
}

// exportedTo reports whether an object of namespace from with the given exportTo is
// visible in namespace ns: everywhere when exportTo is empty or holds "*", its own
// namespace for ".", else the namespaces it names.
func exportedTo(exportTo []string, from, ns string) bool {
	if len(exportTo) == 0 {
		return true
	}
	for _, e := range exportTo {
		if e == "*" || e == ns || (e == "." && from == ns) {
			return true
		}
	}
	return false
}

// HostCandidates returns the FQDNs a host written in an Istio object of namespace ns may
// stand for, most specific first: a short name is a Service of ns (Istio's rule);
// "name.ns" and "name.ns.svc" are the namespaced forms the lab's DNS serves; any other
// name stands for itself. The loader and `meshlab analyze` resolve hosts with it.
func HostCandidates(host, ns string) []string {
	suffix := ".svc." + DefaultClusterDomain
	switch {
	case !strings.Contains(host, "."):
		return []string{host + "." + ns + suffix}
	case strings.HasSuffix(host, ".svc"):
		return []string{host + "." + DefaultClusterDomain, host}
	case strings.Count(host, ".") == 1:
		return []string{host, host + suffix}
	}
	return []string{host}
}
