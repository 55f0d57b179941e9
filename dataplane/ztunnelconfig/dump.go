// Package ztunnelconfig renders `istioctl ztunnel-config`'s tables and dumps from what a
// ztunnel's admin serves on /config_dump: workloads, services, policies, certificates,
// connections and all.
//
// Columns, row sets, order, filters, spacing and the -o json/yaml documents follow
// istioctl's own ztunnel writer (istio.io/istio istioctl/pkg/writer/ztunnel/configdump),
// so that what a learner reads here is what istioctl prints for the same dump;
// fidelity/ztunnelconfig_test.go feeds the same dumps to both. Like istioctl, this package
// knows only the admin's JSON, never the lab or the ztunnel process.
package ztunnelconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Format is an -o value: istioctl's short table, or the objects as JSON or YAML.
type Format string

// The formats istioctl ztunnel-config takes.
const (
	Short Format = "short"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// ParseFormat validates an -o value ("" is the table, istioctl's default "short").
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", Short:
		return Short, nil
	case JSON, YAML:
		return Format(s), nil
	}
	return "", fmt.Errorf("-o %q: want short, json or yaml", s)
}

// The types below are the documents istioctl re-marshals for -o json/yaml: their fields,
// order and omitempty rules make the output, so they are istioctl's shapes, not ztunnel's
// (which the admin package writes).

// Workload is one workload as istioctl reads it.
type Workload struct {
	UID                   string            `json:"uid"`
	WorkloadIPs           []string          `json:"workloadIps"`
	Waypoint              *GatewayAddress   `json:"waypoint,omitempty"`
	NetworkGateway        *GatewayAddress   `json:"networkGateway,omitempty"`
	Protocol              string            `json:"protocol"`
	Name                  string            `json:"name"`
	Namespace             string            `json:"namespace"`
	ServiceAccount        string            `json:"serviceAccount"`
	WorkloadName          string            `json:"workloadName"`
	WorkloadType          string            `json:"workloadType"`
	CanonicalName         string            `json:"canonicalName"`
	CanonicalRevision     string            `json:"canonicalRevision"`
	ClusterID             string            `json:"clusterId"`
	TrustDomain           string            `json:"trustDomain,omitempty"`
	Locality              Locality          `json:"locality,omitempty"` //nolint:staticcheck // a struct is never omitted: istioctl prints "locality": {} too
	Node                  string            `json:"node"`
	Network               string            `json:"network,omitempty"`
	Status                string            `json:"status"`
	Hostname              string            `json:"hostname"`
	Capacity              uint32            `json:"capacity"`
	ApplicationTunnel     ApplicationTunnel `json:"applicationTunnel,omitempty"` //nolint:staticcheck // as Locality
	AuthorizationPolicies []string          `json:"authorizationPolicies,omitempty"`
}

// Locality is a workload's locality.
type Locality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	Subzone string `json:"subzone,omitempty"`
}

// ApplicationTunnel is a workload's application tunnel.
type ApplicationTunnel struct {
	Protocol string  `json:"protocol"`
	Port     *uint16 `json:"port,omitempty"`
}

// GatewayAddress is a waypoint or network gateway: "ns/hostname" or "network/ip".
type GatewayAddress struct {
	Destination string `json:"destination"`
}

// LoadBalancer is a service's load balancing.
type LoadBalancer struct {
	Mode               string   `json:"mode"`
	RoutingPreferences []string `json:"routingPreferences"`
	HealthPolicy       string   `json:"healthPolicy"`
}

// Endpoint is one endpoint of a service.
type Endpoint struct {
	WorkloadUID string            `json:"workloadUid"`
	Service     string            `json:"service"`
	Address     string            `json:"address,omitempty"`
	Port        map[uint16]uint16 `json:"port"`
}

// CIDRVIP is a service's CIDR VIP; ztunnel writes it "network/cidr".
type CIDRVIP struct {
	CIDR    string `json:"cidr"`
	Network string `json:"network,omitempty"`
}

// UnmarshalJSON reads the object form or ztunnel's "network/cidr" string.
func (c *CIDRVIP) UnmarshalJSON(data []byte) error {
	type plain CIDRVIP
	var obj plain
	if err := json.Unmarshal(data, &obj); err == nil {
		*c = CIDRVIP(obj)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("cidrVip: %w", err)
	}
	network, cidr, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("invalid cidrVip %q", s)
	}
	c.Network, c.CIDR = network, cidr
	return nil
}

// MarshalJSON writes "network/cidr".
func (c CIDRVIP) MarshalJSON() ([]byte, error) { return json.Marshal(c.Network + "/" + c.CIDR) }

// Service is one service as istioctl reads it.
type Service struct {
	Name            string               `json:"name"`
	Namespace       string               `json:"namespace"`
	Hostname        string               `json:"hostname"`
	Addresses       []string             `json:"vips"`
	CIDRVIPs        []CIDRVIP            `json:"cidrVips,omitempty"`
	Ports           map[string]int       `json:"ports"`
	LoadBalancer    *LoadBalancer        `json:"loadBalancer,omitempty"`
	Waypoint        *GatewayAddress      `json:"waypoint,omitempty"`
	Endpoints       map[string]*Endpoint `json:"endpoints"`
	SubjectAltNames []string             `json:"subjectAltNames,omitempty"`
	IPFamilies      string               `json:"ipFamilies"`
	Canonical       bool                 `json:"canonical,omitempty"`
	Visibility      string               `json:"visibility,omitempty"`
}

// PolicyMatch is one match of a policy rule.
type PolicyMatch struct {
	Namespaces          []StringMatch         `json:"namespaces,omitempty"`
	NotNamespaces       []StringMatch         `json:"notNamespaces,omitempty"`
	Principals          []StringMatch         `json:"principals,omitempty"`
	NotPrincipals       []StringMatch         `json:"notPrincipals,omitempty"`
	SourceIps           []string              `json:"sourceIps,omitempty"`
	NotSourceIps        []string              `json:"notSourceIps,omitempty"`
	DestinationIps      []string              `json:"destinationIps,omitempty"`
	NotDestinationIps   []string              `json:"notDestinationIps,omitempty"`
	DestinationPorts    []uint16              `json:"destinationPorts,omitempty"`
	NotDestinationPorts []uint16              `json:"notDestinationPorts,omitempty"`
	ServiceAccounts     []ServiceAccountMatch `json:"serviceAccounts,omitempty"`
	NotServiceAccounts  []ServiceAccountMatch `json:"notServiceAccounts,omitempty"`
}

// StringMatch is serde's spelling of ztunnel's enum: one of the keys is set.
type StringMatch struct {
	Exact    string `json:"Exact,omitempty"`
	Suffix   string `json:"Suffix,omitempty"`
	Prefix   string `json:"Prefix,omitempty"`
	Presence any    `json:"Presence,omitempty"`
}

// ServiceAccountMatch matches a namespace and service account.
type ServiceAccountMatch struct {
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
}

// Policy is one L4 policy as istioctl reads it (without ztunnel's dryRun).
type Policy struct {
	Name      string             `json:"name"`
	Namespace string             `json:"namespace"`
	Scope     string             `json:"scope"`
	Action    string             `json:"action"`
	Rules     [][][]*PolicyMatch `json:"rules"`
}

// Certs are one identity's certificates.
type Certs struct {
	Identity  string  `json:"identity"`
	State     string  `json:"state"`
	CertChain []*Cert `json:"certChain"`
	RootCert  []*Cert `json:"rootCerts"`
}

// Cert is one certificate of a chain.
type Cert struct {
	Pem            string `json:"pem"`
	SerialNumber   string `json:"serialNumber"`
	ValidFrom      string `json:"validFrom"`
	ExpirationTime string `json:"expirationTime"`
}

// WorkloadState is one ZDS pod's proxy state with its connections.
type WorkloadState struct {
	State       string              `json:"state,omitempty"`
	Connections WorkloadConnections `json:"connections,omitempty"` //nolint:staticcheck // as Locality
	Info        WorkloadInfo        `json:"info"`
}

// WorkloadConnections are a pod's live connections.
type WorkloadConnections struct {
	Inbound  []Connection `json:"inbound"`
	Outbound []Connection `json:"outbound"`
}

// WorkloadInfo names a ZDS pod.
type WorkloadInfo struct {
	Name           string `json:"name"`
	Namespace      string `json:"namespace"`
	TrustDomain    string `json:"trustDomain"`
	ServiceAccount string `json:"serviceAccount"`
}

// Connection is one live connection.
type Connection struct {
	Src         string `json:"src"`
	OriginalDst string `json:"originalDst"`
	ActualDst   string `json:"actualDst"`
	Protocol    string `json:"protocol"`
}

// Dump is a parsed /config_dump.
type Dump struct {
	Workloads     []*Workload
	Services      []*Service
	Policies      []*Policy
	Certificates  []*Certs
	WorkloadState map[string]WorkloadState
	// Raw is the dump as read, for `all -o json|yaml`.
	Raw []byte
}

// Parse reads a ztunnel /config_dump. Each list may also be an object keyed by name (an
// older ztunnel's form), read in key order.
func Parse(b []byte) (*Dump, error) {
	var raw struct {
		Workloads     json.RawMessage          `json:"workloads"`
		Services      json.RawMessage          `json:"services"`
		Policies      json.RawMessage          `json:"policies"`
		Certificates  json.RawMessage          `json:"certificates"`
		WorkloadState map[string]WorkloadState `json:"workloadState"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse ztunnel config dump: %w", err)
	}
	d := &Dump{WorkloadState: raw.WorkloadState, Raw: b}
	for _, f := range []func() error{
		func() error { return listOrMap(raw.Workloads, &d.Workloads) },
		func() error { return listOrMap(raw.Services, &d.Services) },
		func() error { return listOrMap(raw.Policies, &d.Policies) },
		func() error { return listOrMap(raw.Certificates, &d.Certificates) },
	} {
		if err := f(); err != nil {
			return nil, fmt.Errorf("parse ztunnel config dump: %w", err)
		}
	}
	return d, nil
}

func listOrMap[T any](in json.RawMessage, out *[]T) error {
	s := strings.TrimSpace(string(in))
	if s == "" || s == "null" {
		return nil
	}
	if s[0] == '[' {
		return json.Unmarshal(in, out)
	}
	m := map[string]T{}
	if err := json.Unmarshal(in, &m); err != nil {
		return err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		*out = append(*out, m[k])
	}
	return nil
}
