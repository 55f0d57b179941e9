// Package admin is ztunnel's admin server (127.0.0.1:15000 in ztunnel's network
// namespace): /config_dump in ztunnel's JSON shape, which istioctl ztunnel-config reads,
// /logging, /quitquitquit, and /healthz/ready. It reads the running ztunnel through State,
// a narrow read-only interface the process implements.
package admin

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/rbac"
)

// State is what the admin shows of a running ztunnel. Implementations are safe for
// concurrent use and never block for long; each call returns a snapshot the admin only
// reads (it never modifies what it is given). The admin calls them once per request.
type State interface {
	// Workloads are the WDS workloads the ztunnel holds.
	Workloads() []*workload.Workload
	// Services are the WDS services the ztunnel holds.
	Services() []*workload.Service
	// Policies are the WADS authorizations the ztunnel holds.
	Policies() []*security.Authorization
	// Certificates are the workload certificates it holds or is fetching, one per
	// identity.
	Certificates() []Certificate
	// Pods are the pods ZDS handed it, by ZDS uid.
	Pods() map[string]Pod
}

// CertState is a certificate's state in the dump.
type CertState string

// The states ztunnel reports; an unavailable certificate's state is
// "Unavailable: <error>" (use Unavailable).
const (
	CertInitializing CertState = "Initializing"
	CertAvailable    CertState = "Available"
)

// Unavailable is the state of a certificate that could not be fetched.
func Unavailable(err error) CertState { return CertState("Unavailable: " + err.Error()) }

// Certificate is one identity's certificate.
type Certificate struct {
	Identity string // spiffe:// URI
	State    CertState
	Chain    []*x509.Certificate // leaf first, then intermediates (when Available)
	Roots    []*x509.Certificate
}

// PodState is a ZDS pod's proxy state.
type PodState string

// The states of a pod's in-pod proxy.
const (
	PodPending PodState = "Pending"
	PodUp      PodState = "Up"
)

// Pod is one pod ZDS handed over, with its live connections when its proxy is up.
type Pod struct {
	State          PodState
	Name           string
	Namespace      string
	ServiceAccount string
	Inbound        []Connection
	Outbound       []Connection
}

// Connection is one live connection of a pod.
type Connection struct {
	Src netip.AddrPort
	// OriginalDst is the address the client dialled; invalid when unknown (inbound
	// plaintext).
	OriginalDst netip.AddrPort
	ActualDst   netip.AddrPort
	Protocol    string // "TCP" or "HBONE"
}

// Build is the "version" of the dump.
type Build struct {
	Version      string `json:"version"`
	GitRevision  string `json:"gitRevision"`
	RustVersion  string `json:"rustVersion"`
	BuildProfile string `json:"buildProfile"`
	BuildStatus  string `json:"buildStatus"`
	IstioVersion string `json:"istioVersion"`
}

// ConfigDump renders s as ztunnel's /config_dump: workloads sorted by uid, services by
// hostname, policies by key, certificates by identity, workloadState by pod uid, the
// process's config, and every object's keys sorted (ztunnel serializes through
// serde_json's sorted maps), indented by two spaces.
func ConfigDump(s State, config any, build Build) ([]byte, error) {
	dump := map[string]any{
		"workloads":      workloads(s.Workloads()),
		"services":       services(s.Services(), s.Workloads()),
		"policies":       policies(s.Policies()),
		"stagedServices": map[string]any{},
		"staticConfig":   map[string]any{"workloads": []any{}, "policies": []any{}, "services": []any{}},
		"version":        build,
		"config":         config,
		"certificates":   certificates(s.Certificates()),
		"workloadState":  pods(s.Pods()),
	}
	if config == nil {
		dump["config"] = map[string]any{}
	}
	raw, err := json.Marshal(dump)
	if err != nil {
		return nil, fmt.Errorf("marshal config dump: %w", err)
	}
	// Round-trip through generic maps: every object's keys come out sorted, as ztunnel's.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("reorder config dump: %w", err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal config dump: %w", err)
	}
	return out, nil
}

type gatewayJSON struct {
	Destination   string `json:"destination"`
	HBONEMTLSPort uint32 `json:"hboneMtlsPort"`
}

func gateway(g *workload.GatewayAddress) *gatewayJSON {
	if g == nil {
		return nil
	}
	out := &gatewayJSON{HBONEMTLSPort: g.GetHboneMtlsPort()}
	switch d := g.GetDestination().(type) {
	case *workload.GatewayAddress_Hostname:
		out.Destination = d.Hostname.GetNamespace() + "/" + d.Hostname.GetHostname()
	case *workload.GatewayAddress_Address:
		out.Destination = networkAddress(d.Address.GetNetwork(), d.Address.GetAddress())
	}
	return out
}

// networkAddress is ztunnel's "network/ip".
func networkAddress(network string, b []byte) string {
	ip, ok := netip.AddrFromSlice(b)
	if !ok {
		return network + "/"
	}
	return network + "/" + ip.String()
}

type workloadJSON struct {
	WorkloadIPs           []string       `json:"workloadIps"`
	Waypoint              *gatewayJSON   `json:"waypoint,omitempty"`
	NetworkGateway        *gatewayJSON   `json:"networkGateway,omitempty"`
	Protocol              string         `json:"protocol"`
	NetworkMode           string         `json:"networkMode"`
	UID                   string         `json:"uid,omitempty"`
	Name                  string         `json:"name"`
	Namespace             string         `json:"namespace"`
	TrustDomain           string         `json:"trustDomain,omitempty"`
	ServiceAccount        string         `json:"serviceAccount,omitempty"`
	Network               string         `json:"network,omitempty"`
	WorkloadName          string         `json:"workloadName,omitempty"`
	WorkloadType          string         `json:"workloadType,omitempty"`
	CanonicalName         string         `json:"canonicalName,omitempty"`
	CanonicalRevision     string         `json:"canonicalRevision,omitempty"`
	Hostname              string         `json:"hostname,omitempty"`
	Node                  string         `json:"node,omitempty"`
	NativeTunnel          bool           `json:"nativeTunnel,omitempty"`
	ApplicationTunnel     *appTunnelJSON `json:"applicationTunnel,omitempty"`
	AuthorizationPolicies []string       `json:"authorizationPolicies,omitempty"`
	Status                string         `json:"status"`
	ClusterID             string         `json:"clusterId"`
	Locality              *localityJSON  `json:"locality,omitempty"`
	Services              []string       `json:"services,omitempty"`
	Capacity              uint32         `json:"capacity"`
}

type appTunnelJSON struct {
	Protocol string  `json:"protocol"`
	Port     *uint32 `json:"port"`
}

type localityJSON struct {
	Region  string `json:"region"`
	Zone    string `json:"zone"`
	Subzone string `json:"subzone"`
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func workloads(ws []*workload.Workload) []workloadJSON {
	out := make([]workloadJSON, 0, len(ws))
	for _, w := range ws {
		j := workloadJSON{
			WorkloadIPs:           []string{},
			Waypoint:              gateway(w.GetWaypoint()),
			NetworkGateway:        gateway(w.GetNetworkGateway()),
			Protocol:              "TCP",
			NetworkMode:           "Standard",
			UID:                   w.GetUid(),
			Name:                  w.GetName(),
			Namespace:             w.GetNamespace(),
			TrustDomain:           orDefault(w.GetTrustDomain(), "cluster.local"),
			ServiceAccount:        orDefault(w.GetServiceAccount(), "default"),
			Network:               w.GetNetwork(),
			WorkloadName:          w.GetWorkloadName(),
			WorkloadType:          strings.ToLower(w.GetWorkloadType().String()),
			CanonicalName:         w.GetCanonicalName(),
			CanonicalRevision:     w.GetCanonicalRevision(),
			Hostname:              w.GetHostname(),
			Node:                  w.GetNode(),
			NativeTunnel:          w.GetNativeTunnel(),
			AuthorizationPolicies: w.GetAuthorizationPolicies(),
			Status:                "Healthy",
			ClusterID:             orDefault(w.GetClusterId(), "Kubernetes"),
			Capacity:              1,
		}
		for _, a := range w.GetAddresses() {
			if ip, ok := netip.AddrFromSlice(a); ok {
				j.WorkloadIPs = append(j.WorkloadIPs, ip.String())
			}
		}
		if w.GetTunnelProtocol() == workload.TunnelProtocol_HBONE {
			j.Protocol = "HBONE"
		}
		if w.GetNetworkMode() == workload.NetworkMode_HOST_NETWORK {
			j.NetworkMode = "HostNetwork"
		}
		if w.GetStatus() == workload.WorkloadStatus_UNHEALTHY {
			j.Status = "Unhealthy"
		}
		if at := w.GetApplicationTunnel(); at != nil {
			j.ApplicationTunnel = &appTunnelJSON{Protocol: at.GetProtocol().String()}
			if p := at.GetPort(); p != 0 {
				j.ApplicationTunnel.Port = &p
			}
		}
		if l := w.GetLocality(); l != nil && (l.GetRegion() != "" || l.GetZone() != "" || l.GetSubzone() != "") {
			j.Locality = &localityJSON{Region: l.GetRegion(), Zone: l.GetZone(), Subzone: l.GetSubzone()}
		}
		if c := w.GetCapacity(); c != nil {
			j.Capacity = c.GetValue()
		}
		for k := range w.GetServices() {
			j.Services = append(j.Services, k)
		}
		slices.Sort(j.Services)
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b workloadJSON) int { return strings.Compare(a.UID, b.UID) })
	return out
}

type endpointJSON struct {
	WorkloadUID string            `json:"workloadUid"`
	Port        map[string]uint32 `json:"port"`
	Status      string            `json:"status"`
}

type loadBalancerJSON struct {
	RoutingPreferences []string `json:"routingPreferences"`
	Mode               string   `json:"mode"`
	HealthPolicy       string   `json:"healthPolicy"`
}

type serviceJSON struct {
	Name            string                  `json:"name"`
	Namespace       string                  `json:"namespace"`
	Hostname        string                  `json:"hostname"`
	VIPs            []string                `json:"vips"`
	Ports           map[string]uint32       `json:"ports"`
	Endpoints       map[string]endpointJSON `json:"endpoints"`
	SubjectAltNames []string                `json:"subjectAltNames"`
	Waypoint        *gatewayJSON            `json:"waypoint,omitempty"`
	LoadBalancer    *loadBalancerJSON       `json:"loadBalancer,omitempty"`
	IPFamilies      string                  `json:"ipFamilies,omitempty"`
	Canonical       bool                    `json:"canonical"`
	Visibility      string                  `json:"visibility"`
}

// services renders the services with their endpoints, which WDS does not carry: ztunnel
// makes them from every workload whose services map names the service.
func services(ss []*workload.Service, ws []*workload.Workload) []serviceJSON {
	out := make([]serviceJSON, 0, len(ss))
	for _, s := range ss {
		j := serviceJSON{
			Name: s.GetName(), Namespace: s.GetNamespace(), Hostname: s.GetHostname(),
			VIPs: []string{}, Ports: map[string]uint32{}, Endpoints: map[string]endpointJSON{},
			SubjectAltNames: orEmpty(s.GetSubjectAltNames()),
			Waypoint:        gateway(s.GetWaypoint()),
			Canonical:       s.GetCanonical(),
			Visibility:      "Public",
		}
		for _, a := range s.GetAddresses() {
			j.VIPs = append(j.VIPs, networkAddress(a.GetNetwork(), a.GetAddress()))
		}
		for _, p := range s.GetPorts() {
			j.Ports[strconv.FormatUint(uint64(p.GetServicePort()), 10)] = p.GetTargetPort()
		}
		if s.GetVisibility() == workload.Service_NAMESPACE {
			j.Visibility = "Namespace"
		}
		switch s.GetIpFamilies() {
		case workload.IPFamilies_IPV4_ONLY:
			j.IPFamilies = "IPv4"
		case workload.IPFamilies_IPV6_ONLY:
			j.IPFamilies = "IPv6"
		case workload.IPFamilies_DUAL:
			j.IPFamilies = "Dual"
		case workload.IPFamilies_AUTOMATIC:
		}
		if lb := s.GetLoadBalancing(); lb != nil {
			j.LoadBalancer = &loadBalancerJSON{RoutingPreferences: []string{}, Mode: "Standard", HealthPolicy: "OnlyHealthy"}
			for _, sc := range lb.GetRoutingPreference() {
				name := workload.LoadBalancing_Scope_name[int32(sc)]
				if sc != workload.LoadBalancing_UNSPECIFIED_SCOPE && name != "" {
					j.LoadBalancer.RoutingPreferences = append(j.LoadBalancer.RoutingPreferences, title(name))
				}
			}
			if m := lb.GetMode(); m != workload.LoadBalancing_UNSPECIFIED_MODE {
				j.LoadBalancer.Mode = title(m.String())
			}
			if lb.GetHealthPolicy() == workload.LoadBalancing_ALLOW_ALL {
				j.LoadBalancer.HealthPolicy = "AllowAll"
			}
		}
		key := s.GetNamespace() + "/" + s.GetHostname()
		for _, w := range ws {
			pl, ok := w.GetServices()[key]
			if !ok {
				continue
			}
			ep := endpointJSON{WorkloadUID: w.GetUid(), Port: map[string]uint32{}, Status: "Healthy"}
			if w.GetStatus() == workload.WorkloadStatus_UNHEALTHY {
				ep.Status = "Unhealthy"
			}
			for _, p := range pl.GetPorts() {
				ep.Port[strconv.FormatUint(uint64(p.GetServicePort()), 10)] = p.GetTargetPort()
			}
			j.Endpoints[w.GetUid()] = ep
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b serviceJSON) int {
		if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace, b.Namespace)
	})
	return out
}

// title is an enum's name as ztunnel's Rust variant: "FAILOVER" -> "Failover".
func title(s string) string {
	if s == "" {
		return s
	}
	return s[:1] + strings.ToLower(s[1:])
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type policyJSON struct {
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Scope     string          `json:"scope"`
	Action    string          `json:"action"`
	Rules     [][][]matchJSON `json:"rules"`
	DryRun    bool            `json:"dryRun"`
}

type saJSON struct {
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
}

type matchJSON struct {
	Namespaces          []map[string]any `json:"namespaces,omitempty"`
	NotNamespaces       []map[string]any `json:"notNamespaces,omitempty"`
	ServiceAccounts     []saJSON         `json:"serviceAccounts,omitempty"`
	NotServiceAccounts  []saJSON         `json:"notServiceAccounts,omitempty"`
	Principals          []map[string]any `json:"principals,omitempty"`
	NotPrincipals       []map[string]any `json:"notPrincipals,omitempty"`
	SourceIPs           []string         `json:"sourceIps,omitempty"`
	NotSourceIPs        []string         `json:"notSourceIps,omitempty"`
	DestinationIPs      []string         `json:"destinationIps,omitempty"`
	NotDestinationIPs   []string         `json:"notDestinationIps,omitempty"`
	DestinationPorts    []uint16         `json:"destinationPorts,omitempty"`
	NotDestinationPorts []uint16         `json:"notDestinationPorts,omitempty"`
}

// policies are the WADS resources as ztunnel holds them once compiled (refused ones left
// out, dropped values gone), in serde's enum spelling: {"Exact": "x"}, {"Presence": []}.
func policies(auths []*security.Authorization) []policyJSON {
	set, _ := rbac.NewSet(auths)
	out := []policyJSON{}
	for _, p := range set.Policies() {
		j := policyJSON{Name: p.Name, Namespace: p.Namespace, Scope: scopeName(p.Scope), Action: "Allow", DryRun: p.DryRun, Rules: [][][]matchJSON{}}
		if p.Action == security.Action_DENY {
			j.Action = "Deny"
		}
		for _, g := range p.Groups {
			group := [][]matchJSON{}
			for _, r := range g {
				rule := []matchJSON{}
				for _, m := range r {
					rule = append(rule, match(m))
				}
				group = append(group, rule)
			}
			j.Rules = append(j.Rules, group)
		}
		out = append(out, j)
	}
	return out
}

func scopeName(s security.Scope) string {
	switch s {
	case security.Scope_NAMESPACE:
		return "Namespace"
	case security.Scope_WORKLOAD_SELECTOR:
		return "WorkloadSelector"
	case security.Scope_GLOBAL:
	}
	return "Global"
}

func match(m rbac.Match) matchJSON {
	sm := func(in []rbac.StringMatch) []map[string]any {
		var out []map[string]any
		for _, s := range in {
			switch s.Kind {
			case rbac.Exact:
				out = append(out, map[string]any{"Exact": s.Value})
			case rbac.Prefix:
				out = append(out, map[string]any{"Prefix": s.Value})
			case rbac.Suffix:
				out = append(out, map[string]any{"Suffix": s.Value})
			case rbac.Presence:
				out = append(out, map[string]any{"Presence": []any{}})
			}
		}
		return out
	}
	sa := func(in []rbac.ServiceAccountMatch) []saJSON {
		var out []saJSON
		for _, s := range in {
			out = append(out, saJSON{Namespace: s.Namespace, ServiceAccount: s.ServiceAccount})
		}
		return out
	}
	ips := func(in []netip.Prefix) []string {
		var out []string
		for _, p := range in {
			out = append(out, p.String())
		}
		return out
	}
	return matchJSON{
		Namespaces: sm(m.Namespaces), NotNamespaces: sm(m.NotNamespaces),
		ServiceAccounts: sa(m.ServiceAccounts), NotServiceAccounts: sa(m.NotServiceAccounts),
		Principals: sm(m.Principals), NotPrincipals: sm(m.NotPrincipals),
		SourceIPs: ips(m.SourceIPs), NotSourceIPs: ips(m.NotSourceIPs),
		DestinationIPs: ips(m.DestinationIPs), NotDestinationIPs: ips(m.NotDestinationIPs),
		DestinationPorts: m.DestinationPorts, NotDestinationPorts: m.NotDestinationPorts,
	}
}

type certJSON struct {
	PEM            string `json:"pem"`
	SerialNumber   string `json:"serialNumber"`
	ValidFrom      string `json:"validFrom"`
	ExpirationTime string `json:"expirationTime"`
}

type certsJSON struct {
	Identity  string     `json:"identity"`
	State     string     `json:"state"`
	CertChain []certJSON `json:"certChain"`
	RootCerts []certJSON `json:"rootCerts"`
}

// certificates are ztunnel's: the PEM base64-encoded, the serial in decimal, validity in
// RFC 3339 seconds, sorted by identity.
func certificates(cs []Certificate) []certsJSON {
	one := func(c *x509.Certificate) certJSON {
		p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		return certJSON{
			PEM:            base64.StdEncoding.EncodeToString(p),
			SerialNumber:   c.SerialNumber.String(),
			ValidFrom:      c.NotBefore.UTC().Format(time.RFC3339),
			ExpirationTime: c.NotAfter.UTC().Format(time.RFC3339),
		}
	}
	out := make([]certsJSON, 0, len(cs))
	for _, c := range cs {
		j := certsJSON{Identity: c.Identity, State: string(c.State), CertChain: []certJSON{}, RootCerts: []certJSON{}}
		for _, x := range c.Chain {
			j.CertChain = append(j.CertChain, one(x))
		}
		for _, x := range c.Roots {
			j.RootCerts = append(j.RootCerts, one(x))
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b certsJSON) int { return strings.Compare(a.Identity, b.Identity) })
	return out
}

type connJSON struct {
	Src         string  `json:"src"`
	OriginalDst *string `json:"originalDst"`
	ActualDst   string  `json:"actualDst"`
	Protocol    string  `json:"protocol"`
}

type podJSON struct {
	State       string `json:"state"`
	Connections *struct {
		Inbound  []connJSON `json:"inbound"`
		Outbound []connJSON `json:"outbound"`
	} `json:"connections,omitempty"`
	Info struct {
		Name           string `json:"name"`
		Namespace      string `json:"namespace"`
		ServiceAccount string `json:"serviceAccount"`
	} `json:"info"`
}

func pods(ps map[string]Pod) map[string]podJSON {
	conns := func(cs []Connection) []connJSON {
		out := []connJSON{}
		for _, c := range cs {
			j := connJSON{Src: c.Src.String(), ActualDst: c.ActualDst.String(), Protocol: orDefault(c.Protocol, "TCP")}
			if c.OriginalDst.IsValid() {
				s := c.OriginalDst.String()
				j.OriginalDst = &s
			}
			out = append(out, j)
		}
		return out
	}
	out := make(map[string]podJSON, len(ps))
	for uid, p := range ps {
		j := podJSON{State: string(p.State)}
		if j.State == "" {
			j.State = string(PodPending)
		}
		j.Info.Name, j.Info.Namespace, j.Info.ServiceAccount = p.Name, p.Namespace, p.ServiceAccount
		if p.State == PodUp {
			j.Connections = &struct {
				Inbound  []connJSON `json:"inbound"`
				Outbound []connJSON `json:"outbound"`
			}{conns(p.Inbound), conns(p.Outbound)}
		}
		out[uid] = j
	}
	return out
}
