// Package metrics is ztunnel's Istio TCP metrics: istio_tcp_connections_opened_total,
// _closed_total, _failed_total, istio_tcp_sent_bytes_total, istio_tcp_received_bytes_total
// and istio_tcp_sockets_open, labelled with ztunnel's CommonTrafficLabels (src/proxy/
// metrics.rs) and written in the OpenMetrics text ztunnel's /stats/prometheus and /metrics
// serve. The ztunnel process opens a Conn per proxied connection, counts its bytes and
// closes it with a response flag; the same Conn gives the access log its fields.
package metrics

import (
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// Reporter is which side of the connection counts it: the client's ztunnel (outbound,
// "source") or the server's (15008/15006 inbound, "destination").
type Reporter uint8

// The two reporters.
const (
	Source Reporter = iota
	Destination
)

// String is the label value.
func (r Reporter) String() string {
	if r == Destination {
		return "destination"
	}
	return "source"
}

// Direction is the access log's word for the reporter: outbound or inbound.
func (r Reporter) Direction() string {
	if r == Destination {
		return "inbound"
	}
	return "outbound"
}

// SecurityPolicy is connection_security_policy: mutual_tls for HBONE, unknown otherwise.
type SecurityPolicy uint8

// The security policies ztunnel reports.
const (
	Unknown SecurityPolicy = iota
	MutualTLS
)

// String is the label value.
func (s SecurityPolicy) String() string {
	if s == MutualTLS {
		return "mutual_tls"
	}
	return "unknown"
}

// ResponseFlag is response_flags: "-" or why the connection failed.
type ResponseFlag string

// ztunnel's response flags.
const (
	FlagNone             ResponseFlag = "-"
	FlagDenied           ResponseFlag = "DENY"
	FlagConnectFailure   ResponseFlag = "CONNECT"
	FlagTLSFailure       ResponseFlag = "TLS_FAILURE"
	FlagH2Handshake      ResponseFlag = "H2_HANDSHAKE_FAILURE"
	FlagNetworkPolicy    ResponseFlag = "NETWORK_POLICY"
	FlagIdentityError    ResponseFlag = "IDENTITY_ERROR"
	FlagCertificateRevok ResponseFlag = "CERT_REVOKED"
)

// failed reports whether the flag counts the connection in _failed_total.
func (f ResponseFlag) failed() bool { return f != FlagNone && f != "" }

// unknown is the value of a label ztunnel does not know.
const unknown = "unknown"

// Labels is ztunnel's CommonTrafficLabels. Empty values are written "unknown". It is
// comparable: one series per distinct value.
type Labels struct {
	Reporter Reporter

	SourceWorkload          string
	SourceCanonicalService  string
	SourceCanonicalRevision string
	SourceWorkloadNamespace string
	SourcePrincipal         string
	SourceApp               string
	SourceVersion           string
	SourceCluster           string

	DestinationService          string
	DestinationServiceNamespace string
	DestinationServiceName      string

	DestinationWorkload          string
	DestinationCanonicalService  string
	DestinationCanonicalRevision string
	DestinationWorkloadNamespace string
	DestinationPrincipal         string
	DestinationApp               string
	DestinationVersion           string
	DestinationCluster           string

	// RequestProtocol is always tcp at ztunnel.
	ResponseFlags            ResponseFlag
	ConnectionSecurityPolicy SecurityPolicy

	// Locality is written (source_region, source_zone, destination_region,
	// destination_zone) once any workload is known, as ztunnel writes it.
	Locality                                                     bool
	SourceRegion, SourceZone, DestinationRegion, DestinationZone string
}

// Pairs are the labels in ztunnel's order, with "unknown" for what is empty.
func (l Labels) Pairs() [][2]string {
	v := func(s string) string {
		if s == "" {
			return unknown
		}
		return s
	}
	flags := l.ResponseFlags
	if flags == "" {
		flags = FlagNone
	}
	out := [][2]string{
		{"reporter", l.Reporter.String()},
		{"source_workload", v(l.SourceWorkload)},
		{"source_canonical_service", v(l.SourceCanonicalService)},
		{"source_canonical_revision", v(l.SourceCanonicalRevision)},
		{"source_workload_namespace", v(l.SourceWorkloadNamespace)},
		{"source_principal", v(l.SourcePrincipal)},
		{"source_app", v(l.SourceApp)},
		{"source_version", v(l.SourceVersion)},
		{"source_cluster", v(l.SourceCluster)},
		{"destination_service", v(l.DestinationService)},
		{"destination_service_namespace", v(l.DestinationServiceNamespace)},
		{"destination_service_name", v(l.DestinationServiceName)},
		{"destination_workload", v(l.DestinationWorkload)},
		{"destination_canonical_service", v(l.DestinationCanonicalService)},
		{"destination_canonical_revision", v(l.DestinationCanonicalRevision)},
		{"destination_workload_namespace", v(l.DestinationWorkloadNamespace)},
		{"destination_principal", v(l.DestinationPrincipal)},
		{"destination_app", v(l.DestinationApp)},
		{"destination_version", v(l.DestinationVersion)},
		{"destination_cluster", v(l.DestinationCluster)},
		{"request_protocol", "tcp"},
		{"response_flags", string(flags)},
		{"connection_security_policy", l.ConnectionSecurityPolicy.String()},
	}
	if l.Locality {
		out = append(out,
			[2]string{"source_region", v(l.SourceRegion)},
			[2]string{"source_zone", v(l.SourceZone)},
			[2]string{"destination_region", v(l.DestinationRegion)},
			[2]string{"destination_zone", v(l.DestinationZone)},
		)
	}
	return out
}

// Derived is a peer known only by its certificate (and its baggage, if any): what ztunnel
// labels the source with when the source address is no workload it knows.
type Derived struct {
	WorkloadName string
	App          string
	Revision     string
	Namespace    string
	Identity     string // spiffe:// URI from the TLS handshake
	ClusterID    string
	Region, Zone string
}

// ServiceDescription is the destination service of an outbound connection.
type ServiceDescription struct {
	Hostname  string // FQDN
	Name      string
	Namespace string
}

// Open is what ztunnel knows when a connection opens.
type Open struct {
	Reporter           Reporter
	Source             *workload.Workload // optional
	DerivedSource      *Derived           // optional; Source wins field by field where set
	Destination        *workload.Workload // optional
	DestinationService *ServiceDescription
	SecurityPolicy     SecurityPolicy
}

// Identity is a WDS workload's SPIFFE identity with ztunnel's defaults applied (trust
// domain cluster.local, service account default).
func Identity(w *workload.Workload) string {
	td, sa := w.GetTrustDomain(), w.GetServiceAccount()
	if td == "" {
		td = "cluster.local"
	}
	if sa == "" {
		sa = "default"
	}
	return "spiffe://" + td + "/ns/" + w.GetNamespace() + "/sa/" + sa
}

// ClusterID is a workload's cluster with ztunnel's default (Kubernetes).
func ClusterID(w *workload.Workload) string {
	if c := w.GetClusterId(); c != "" {
		return c
	}
	return "Kubernetes"
}

// LabelsFor makes the labels as ztunnel does: the derived source first, then the known
// source over it (never its principal: only the handshake's identity is trusted), the
// destination and its service.
func LabelsFor(o Open) Labels {
	l := Labels{Reporter: o.Reporter, ResponseFlags: FlagNone, ConnectionSecurityPolicy: o.SecurityPolicy}
	if d := o.DerivedSource; d != nil {
		l.SourceWorkload = d.WorkloadName
		l.SourceCanonicalService = d.App
		l.SourceCanonicalRevision = d.Revision
		l.SourceWorkloadNamespace = d.Namespace
		l.SourceApp = d.WorkloadName
		l.SourceVersion = d.Revision
		l.SourceCluster = d.ClusterID
		l.SourcePrincipal = d.Identity
		l.Locality, l.SourceRegion, l.SourceZone = true, d.Region, d.Zone
	}
	if w := o.Source; w != nil {
		l.SourceWorkload = w.GetWorkloadName()
		l.SourceCanonicalService = w.GetCanonicalName()
		l.SourceCanonicalRevision = w.GetCanonicalRevision()
		l.SourceWorkloadNamespace = w.GetNamespace()
		l.SourceApp = w.GetCanonicalName()
		l.SourceVersion = w.GetCanonicalRevision()
		l.SourceCluster = ClusterID(w)
		l.Locality, l.SourceRegion, l.SourceZone = true, w.GetLocality().GetRegion(), w.GetLocality().GetZone()
	}
	if w := o.Destination; w != nil {
		l.DestinationWorkload = w.GetWorkloadName()
		l.DestinationCanonicalService = w.GetCanonicalName()
		l.DestinationCanonicalRevision = w.GetCanonicalRevision()
		l.DestinationWorkloadNamespace = w.GetNamespace()
		l.DestinationPrincipal = Identity(w)
		l.DestinationApp = w.GetCanonicalName()
		l.DestinationVersion = w.GetCanonicalRevision()
		l.DestinationCluster = ClusterID(w)
		l.Locality, l.DestinationRegion, l.DestinationZone = true, w.GetLocality().GetRegion(), w.GetLocality().GetZone()
	}
	if s := o.DestinationService; s != nil {
		l.DestinationService = s.Hostname
		l.DestinationServiceName = s.Name
		l.DestinationServiceNamespace = s.Namespace
	}
	return l
}
