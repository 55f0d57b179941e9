package metrics

import (
	"bufio"
	"sync/atomic"
)

// DNSLabels are the labels of ztunnel's DNS counters (src/dns/metrics.rs DnsLabels): the
// query type and protocol in lower case ("a", "udp") and the client pod's canonical
// service and revision. Empty values are written "unknown".
type DNSLabels struct {
	QueryType, Protocol                             string
	SourceCanonicalService, SourceCanonicalRevision string
}

func (l DNSLabels) pairs() [][2]string {
	return [][2]string{
		{"request_query_type", orUnknown(l.QueryType)},
		{"request_protocol", l.Protocol},
		{"source_canonical_service", orUnknown(l.SourceCanonicalService)},
		{"source_canonical_revision", orUnknown(l.SourceCanonicalRevision)},
	}
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

// dnsSeries are the DNS counters of one label set; made as for the TCP series: requests
// at the first request, upstream requests and failures at the first of each.
type dnsSeries struct {
	requests, forwarded, failed atomic.Uint64
	made                        [3]atomic.Bool
}

const (
	dnsRequests = iota
	dnsForwarded
	dnsFailed
)

var dnsFamilies = []counterFamily[*dnsSeries]{
	{"istio_dns_requests", "Total number of DNS requests (unstable).", dnsRequests, func(s *dnsSeries) uint64 { return s.requests.Load() }},
	{"istio_dns_upstream_requests", "Total number of DNS requests forwarded to upstream (unstable).", dnsForwarded, func(s *dnsSeries) uint64 { return s.forwarded.Load() }},
	{"istio_dns_upstream_failures", "Total number of DNS requests that failed to forward upstream (unstable).", dnsFailed, func(s *dnsSeries) uint64 { return s.failed.Load() }},
}

func (r *Registry) dnsGet(l DNSLabels) *dnsSeries {
	r.mu.RLock()
	s := r.dns[l]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dns == nil {
		r.dns = map[DNSLabels]*dnsSeries{}
	}
	if s = r.dns[l]; s == nil {
		s = &dnsSeries{}
		r.dns[l] = s
	}
	return s
}

// DNSRequest counts a query a pod's DNS proxy received: istio_dns_requests_total.
func (r *Registry) DNSRequest(l DNSLabels) {
	s := r.dnsGet(l)
	s.requests.Add(1)
	s.made[dnsRequests].Store(true)
}

// DNSForwarded counts a query sent to the upstream resolver, and failed one it got no
// answer for: istio_dns_upstream_requests_total and istio_dns_upstream_failures_total.
func (r *Registry) DNSForwarded(l DNSLabels, failed bool) {
	s := r.dnsGet(l)
	s.forwarded.Add(1)
	s.made[dnsForwarded].Store(true)
	if failed {
		s.failed.Add(1)
		s.made[dnsFailed].Store(true)
	}
}

// holds reports whether the series is in the DNS family of index id.
func (s *dnsSeries) holds(id int) bool { return s.made[id].Load() }

// writeDNS writes the DNS families, series sorted by their labels.
func (r *Registry) writeDNS(bw *bufio.Writer) {
	r.mu.RLock()
	entries := byLabels(r.dns, func(l DNSLabels) string { return formatLabels(l.pairs()) })
	r.mu.RUnlock()
	writeCounters(bw, dnsFamilies, entries)
}
