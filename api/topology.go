package api

import (
	"net/netip"
	"time"
)

// Topology is the mesh as the dashboard draws it: services, their pods, and edges from
// a calling pod to the service it called, measured by the caller's sidecar.
type Topology struct {
	Time     time.Time         `json:"time"`
	Services []TopologyService `json:"services"`
	Pods     []TopologyPod     `json:"pods"`
	Edges    []TopologyEdge    `json:"edges"`
}

// TopologyService is one service node.
type TopologyService struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Hostname  string     `json:"hostname"` // name.namespace.svc.cluster.local
	VIP       netip.Addr `json:"vip"`
	Ports     []uint16   `json:"ports"`
	Pods      []string   `json:"pods"` // the pods its selector matches
	// Gateway reports whether the service selects a gateway pod (istio-ingressgateway):
	// the mesh's entry, drawn at the left edge.
	Gateway bool `json:"gateway,omitempty"`
}

// TopologyPod is one pod node.
type TopologyPod struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Key names the pod in the API and in the topology's services and edges (see
	// PodStatus.Key).
	Key     string     `json:"key"`
	IP      netip.Addr `json:"ip"`
	Sidecar bool       `json:"sidecar"`
	Ready   bool       `json:"ready"`
	Epoch   int        `json:"epoch"` // the live proxy epoch, -1 when none
	// RBACDenied counts the requests and connections the pod's sidecar refused by an
	// AuthorizationPolicy (its inbound filters' rbac.denied stats, since the proxy started).
	RBACDenied uint64 `json:"rbacDenied"`
	// Gateway reports whether the pod is a standalone gateway (Istio's router node type).
	Gateway bool `json:"gateway,omitempty"`
	// DataplaneMode is how the pod's traffic joins the mesh: "sidecar", "ambient" (its
	// traffic goes through the node's ztunnel) or "none".
	DataplaneMode string `json:"dataplaneMode,omitempty"`
	// Ztunnel reports whether the pod is the lab's ztunnel (istio-system/ztunnel-<x>),
	// ready when its metrics answered.
	Ztunnel bool `json:"ztunnel,omitempty"`
}

// HostNode is the From of an edge that entered the mesh from the host: requests a
// gateway pod received that no pod's sidecar sent, which is `meshlab port-forward`'s
// traffic (it dials from the lab's node namespace, outside every pod).
const HostNode = "host (port-forward)"

// Where an edge's Requests and Errors were counted (TopologyEdge.Metric).
const (
	// EdgeMetricIstio: the caller's istio_requests_total{reporter="source"} by
	// destination_service, 5xx by response_code, as Istio's dashboards and docs query it.
	EdgeMetricIstio = "istio_requests_total"
	// EdgeMetricCluster: the caller's outbound cluster stats (upstream_rq_total, _5xx),
	// for a proxy that reports no Istio metrics for the service.
	EdgeMetricCluster = "upstream_rq_total"
	// EdgeMetricGateway: the gateway's downstream requests (http.outbound_*.
	// downstream_rq_total, _5xx) less those the mesh's sidecars sent it.
	EdgeMetricGateway = "downstream_rq_total"
	// EdgeMetricZtunnel: an ambient pod's connections as the node's ztunnel counted them,
	// istio_tcp_connections_opened_total{reporter="source"} by source workload and
	// destination_service; Errors are istio_tcp_connections_failed_total. Requests are
	// then TCP connections (ztunnel is L4: it sees no request).
	EdgeMetricZtunnel = "istio_tcp_connections_opened_total"
)

// TopologyEdge is traffic from a pod's sidecar to a service: the sidecar's Istio
// metrics for that service when it has some, else its outbound clusters of that service
// (every port and subset); from an ambient pod, the connections the ztunnel carried for
// it (EdgeMetricZtunnel); or traffic from the host (From is HostNode) to a gateway.
type TopologyEdge struct {
	From string `json:"from"` // pod name, or HostNode
	// Metric names what Requests and Errors were counted from (EdgeMetric*).
	Metric   string `json:"metric"`
	To       string `json:"to"` // service hostname
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"` // 5xx answers
	// RPS and ErrorRate are measured over the last poll interval (0 on the first poll).
	RPS       float64 `json:"rps"`
	ErrorRate float64 `json:"errorRate"` // errors / requests over the interval, 0..1
	// MTLS reports whether the sidecar's connections to the service are mutual TLS: it
	// counted TLS handshakes on the service's clusters, or its auto-mTLS socket match chose
	// tlsMode-istio for the endpoints and never the plaintext (raw) match.
	MTLS bool `json:"mtls"`
	// Handshakes counts the sidecar's TLS handshakes to the service (ssl.handshake).
	Handshakes uint64 `json:"handshakes"`
	// MTLSEndpoints and PlaintextEndpoints count the endpoints the sidecar's auto-mTLS
	// socket matches sent over mTLS (tlsMode-istio.total_match_count) and in plaintext
	// (the raw-buffer match, tlsMode-disabled).
	MTLSEndpoints      uint64 `json:"mtlsEndpoints"`
	PlaintextEndpoints uint64 `json:"plaintextEndpoints"`
	// Denied counts 403 answers the sidecar got from the service: an AuthorizationPolicy
	// denial at the server's sidecar answers 403 "RBAC: access denied" (upstream_rq_403).
	Denied uint64 `json:"denied"`
	// HBONE reports whether the edge's connections went over HBONE (mutual TLS from the
	// caller's ztunnel to the destination pod's 15008): ztunnel reported them with
	// connection_security_policy="mutual_tls".
	HBONE bool `json:"hbone,omitempty"`
}
