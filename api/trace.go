package api

import (
	"errors"
)

// TraceRequest asks the lab to send one request from Pod's namespace and explain its path.
// Target is a URL ("http://backend:8080/path") or "host:port" (path "/").
type TraceRequest struct {
	Pod    string `json:"pod"`
	Target string `json:"target"`
}

// Validate checks that both fields are set; the lab parses Target.
func (r TraceRequest) Validate() error {
	if r.Pod == "" {
		return errors.New("pod: required")
	}
	if r.Target == "" {
		return errors.New("target: required (a URL or host:port)")
	}
	return nil
}

// TraceResult is the answer of POST /v1/trace: one request's path, hop by hop, each hop
// linked to what produced it. JSON:
//
//	{"pod": "frontend-v1", "url": "http://backend:8080/", "requestId": "meshlab-trace-…",
//	 "address": "10.96.0.10:8080",           // where the pod's connection went (VIP)
//	 "status": 200, "durationMs": 3.1,       // as the client saw it
//	 "hops": [ {TraceHop}, … ]}              // in order: source capture, source proxy,
//	                                         // destination capture, destination proxy, app
type TraceResult struct {
	Pod        string     `json:"pod"`
	URL        string     `json:"url"`
	RequestID  string     `json:"requestId"`
	Address    string     `json:"address"`
	Status     int        `json:"status"`
	DurationMs float64    `json:"durationMs"`
	Error      string     `json:"error,omitempty"` // the request got no answer
	Hops       []TraceHop `json:"hops"`
}

// Kinds of TraceHop.
const (
	HopCapture = "capture" // iptables rules the connection hit in a pod's namespace
	HopProxy   = "proxy"   // a sidecar's handling of the request
	HopApp     = "app"     // the destination app's answer
	HopZtunnel = "ztunnel" // the node's ztunnel carrying an ambient pod's connection
)

// TraceHop is one step of a traced request. Kind says which fields are set:
//
//   - "capture": Rules, the nat rules whose packet counters rose during the request
//     (iptables-save -c before and after, in the pod's namespace).
//   - "proxy": Direction "outbound" (the source's sidecar) or "inbound" (the
//     destination's); Listener, FilterChain, VirtualHost, Route and Cluster name the xDS
//     resources that handled it, each with its Origin (the "istio" filter metadata's
//     config path, e.g. "/apis/networking.istio.io/v1alpha3/namespaces/default/virtual-service/backend");
//     Endpoint is the upstream address chosen; MTLS and PeerIdentity say whether the hop
//     to (outbound) or from (inbound) the other sidecar was mutual TLS and with whom;
//     RBAC is "allowed", "denied" or "" (no policy counted it); UpstreamServiceTimeMs is
//     the proxy's x-envoy-upstream-service-time; Stats are the proxy's counters that
//     rose during the request. AccessLog is the proxy's access log line for the request
//     (found by its x-request-id; "" when access logs are off), and DurationMs and
//     ResponseFlags are read from it.
//   - "ztunnel": the lab's ztunnel (Pod is its key) for an ambient pod's connection,
//     explained from its access log line for the connection (AccessLog): Direction
//     "outbound" (its 15001 listener in the source pod's namespace; Endpoint the
//     destination's 15008 and Target the HBONE :authority, or the plaintext target) or
//     "inbound" (its 15008 listener in the destination pod's namespace, or 15006 for
//     plaintext; Endpoint the app's address); Protocol "HBONE" or "TCP"; MTLS and
//     PeerIdentity as for a sidecar; RBAC ztunnel's L4 policy verdict ("allowed",
//     "denied") with its reason in Notes.
//   - "app": Pod, Version and Status of the answer.
type TraceHop struct {
	Kind  string `json:"kind"`
	Pod   string `json:"pod"`
	Notes string `json:"notes,omitempty"`

	Rules []TraceRule `json:"rules,omitempty"`

	Direction             string           `json:"direction,omitempty"`
	Listener              *TraceResource   `json:"listener,omitempty"`
	FilterChain           *TraceResource   `json:"filterChain,omitempty"`
	VirtualHost           *TraceResource   `json:"virtualHost,omitempty"`
	Route                 *TraceResource   `json:"route,omitempty"`
	Cluster               *TraceResource   `json:"cluster,omitempty"`
	Endpoint              string           `json:"endpoint,omitempty"`
	MTLS                  bool             `json:"mtls,omitempty"`
	PeerIdentity          string           `json:"peerIdentity,omitempty"`
	RBAC                  string           `json:"rbac,omitempty"`
	UpstreamServiceTimeMs *int             `json:"upstreamServiceTimeMs,omitempty"`
	Stats                 map[string]int64 `json:"stats,omitempty"`
	AccessLog             string           `json:"accessLog,omitempty"`
	DurationMs            *int             `json:"durationMs,omitempty"`
	ResponseFlags         string           `json:"responseFlags,omitempty"`
	Protocol              string           `json:"protocol,omitempty"` // ztunnel: HBONE or TCP
	Target                string           `json:"target,omitempty"`   // ztunnel: the HBONE :authority

	Version string `json:"version,omitempty"`
	Status  int    `json:"status,omitempty"`
}

// TraceRule is one iptables rule a traced connection hit: its chain, its rule text as
// iptables-save prints it, its -m comment and how many packets it counted meanwhile.
type TraceRule struct {
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Rule    string `json:"rule"`
	Comment string `json:"comment,omitempty"`
	Packets int64  `json:"packets"`
}

// TraceResource names one xDS resource and the config object it was generated from
// (Origin: the API path in its "istio" filter metadata; "" when it has none).
type TraceResource struct {
	Name   string `json:"name"`
	Origin string `json:"origin,omitempty"`
}
