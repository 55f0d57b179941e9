// Package peer is istio-proxy's peer metadata as the built-in proxy exchanges it: the
// workload description two sidecars tell each other (its pod, workload, namespace,
// cluster, canonical service and revision, app and version), read from the local
// node's metadata, carried in the TCP metadata exchange (istio.metadata_exchange
// network and upstream cluster filters) and in the HTTP headers x-envoy-peer-metadata
// and x-envoy-peer-metadata-id (the peer_metadata HTTP filter), and consumed by
// istio.stats for the source_* and destination_* labels.
//
// The local node is process-wide, as Envoy's LocalInfo: SetLocal is called once at
// startup before any listener or cluster compiles; Local is safe for concurrent use.
package peer

import (
	"encoding/base64"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Header names of the HTTP metadata exchange.
const (
	HeaderMetadata   = "X-Envoy-Peer-Metadata"
	HeaderMetadataID = "X-Envoy-Peer-Metadata-Id"
)

// Label keys istio-proxy keeps of a workload's labels.
const (
	LabelCanonicalName     = "service.istio.io/canonical-name"
	LabelCanonicalRevision = "service.istio.io/canonical-revision"
	LabelApp               = "app"
	LabelVersion           = "version"
)

// Workload is istio-proxy's WorkloadMetadataObject: what a sidecar knows of its peer.
// Empty fields are unknown.
type Workload struct {
	Name              string // the pod (NAME)
	Namespace         string // NAMESPACE
	Cluster           string // CLUSTER_ID
	WorkloadName      string // WORKLOAD_NAME
	Owner             string // OWNER, e.g. kubernetes://apis/apps/v1/namespaces/ns/deployments/w
	CanonicalName     string
	CanonicalRevision string
	App               string
	Version           string
	// Identity is the workload's SPIFFE identity, known only of a workload found by
	// metadata discovery (istio-proxy's WorkloadMetadataObject identity).
	Identity string
	// state is the filter state's string form of a discovered workload (its exchange
	// encoding), made once.
	state string
	// Labels are the additional_labels the filter was asked to keep, beyond the four above.
	Labels map[string]string
}

// FromStruct reads node metadata (or an exchanged peer struct) in istio-proxy's keys,
// keeping the additional labels named in extra.
func FromStruct(s *structpb.Struct, extra []string) *Workload {
	f := s.GetFields()
	str := func(k string) string { return f[k].GetStringValue() }
	labels := f["LABELS"].GetStructValue().GetFields()
	lbl := func(k string) string { return labels[k].GetStringValue() }
	w := &Workload{
		Name: str("NAME"), Namespace: str("NAMESPACE"), Cluster: str("CLUSTER_ID"),
		WorkloadName: str("WORKLOAD_NAME"), Owner: str("OWNER"),
		CanonicalName: lbl(LabelCanonicalName), CanonicalRevision: lbl(LabelCanonicalRevision),
		App: lbl(LabelApp), Version: lbl(LabelVersion),
	}
	for _, k := range extra {
		if v, ok := labels[k]; ok {
			if w.Labels == nil {
				w.Labels = map[string]string{}
			}
			w.Labels[k] = v.GetStringValue()
		}
	}
	return w
}

// Struct returns w in istio-proxy's exchange form (convertWorkloadMetadataToStruct):
// NAME, NAMESPACE, WORKLOAD_NAME, CLUSTER_ID, OWNER when set, and LABELS with the
// canonical name and revision, app, version and the additional labels.
func (w *Workload) Struct() *structpb.Struct {
	f := map[string]*structpb.Value{}
	set := func(k, v string) {
		if v != "" {
			f[k] = structpb.NewStringValue(v)
		}
	}
	set("NAME", w.Name)
	set("NAMESPACE", w.Namespace)
	set("WORKLOAD_NAME", w.WorkloadName)
	set("CLUSTER_ID", w.Cluster)
	set("OWNER", w.Owner)
	labels := map[string]*structpb.Value{}
	for k, v := range map[string]string{LabelCanonicalName: w.CanonicalName, LabelCanonicalRevision: w.CanonicalRevision, LabelApp: w.App, LabelVersion: w.Version} {
		if v != "" {
			labels[k] = structpb.NewStringValue(v)
		}
	}
	for k, v := range w.Labels {
		labels[k] = structpb.NewStringValue(v)
	}
	f["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: labels})
	return &structpb.Struct{Fields: f}
}

// HeaderValue returns the x-envoy-peer-metadata value for w: the deterministic protobuf
// encoding of Struct, base64 encoded.
func (w *Workload) HeaderValue() string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(w.Struct())
	if err != nil {
		return "" // a Struct of strings always marshals
	}
	return base64.StdEncoding.EncodeToString(b)
}

// ParseHeader decodes an x-envoy-peer-metadata value (padded or not), or reports false
// when it is not one, as istio-proxy then ignores the header.
func ParseHeader(v string, extra []string) (*Workload, bool) {
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
	if err != nil {
		return nil, false
	}
	var s structpb.Struct
	if err := proto.Unmarshal(b, &s); err != nil {
		return nil, false
	}
	return FromStruct(&s, extra), true
}

// FromEndpoint reads the telemetry encoding istiod puts in an endpoint's istio
// metadata ("workload": "name;namespace;canonical-name;canonical-revision;cluster"),
// the client side's fallback when no peer metadata arrived; false when malformed.
func FromEndpoint(v string) (*Workload, bool) {
	parts := strings.Split(v, ";")
	if len(parts) < 5 {
		return nil, false
	}
	return &Workload{WorkloadName: parts[0], Namespace: parts[1], CanonicalName: parts[2],
		CanonicalRevision: parts[3], Cluster: parts[4]}, true
}

// Node is the local node as the peer filters use it. Immutable.
type Node struct {
	ID       string
	Workload *Workload
	// Header is Workload.HeaderValue(), computed once.
	Header string
	// Metadata is the node's metadata as the bootstrap has it.
	Metadata *structpb.Struct
	// idValues and headerValues are ID and Header as header values, made once and
	// shared by every request's headers (see setShared).
	idValues, headerValues []string
}

var local atomic.Pointer[Node]

// SetLocal records the local node (the bootstrap's node) for every peer filter.
func SetLocal(n *corev3.Node) {
	w := FromStruct(n.GetMetadata(), nil)
	local.Store(newNode(n.GetId(), w, n.GetMetadata()))
}

func newNode(id string, w *Workload, md *structpb.Struct) *Node {
	h := w.HeaderValue()
	return &Node{ID: id, Workload: w, Header: h, Metadata: md,
		idValues: []string{id}[:1:1], headerValues: []string{h}[:1:1]}
}

// Local returns the local node; an empty one before SetLocal.
func Local() *Node {
	if n := local.Load(); n != nil {
		return n
	}
	return emptyNode()
}

// emptyNode is made on first use: its header value is a protobuf encoding, whose
// first use costs every process of the binary ~29 KB at package init otherwise.
var emptyNode = sync.OnceValue(func() *Node { return newNode("", &Workload{}, nil) })

// SANNamespace returns the namespace of a SPIFFE principal
// (".../ns/<namespace>/sa/<account>"), "" when it has none.
func SANNamespace(principal string) string {
	_, rest, ok := strings.Cut(principal, "/ns/")
	if !ok {
		return ""
	}
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}
