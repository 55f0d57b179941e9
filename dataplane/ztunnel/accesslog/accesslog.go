// Package accesslog is ztunnel's access log: the "connection complete" line it writes when
// a proxied connection ends (src/proxy/metrics.rs), in ztunnel's log format
// (time, level, target "access", message, then key=value fields), and a reader of such
// lines for whoever explains traffic from ztunnel's log.
package accesslog

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
)

// Entry is one completed connection.
type Entry struct {
	Src          netip.AddrPort
	SrcWorkload  string // the source pod's name, else its canonical service
	SrcNamespace string
	SrcIdentity  string // only over mTLS
	SrcCluster   string

	Dst netip.AddrPort
	// DstHBONEAddr is the CONNECT target (:authority) when the connection went over
	// HBONE; invalid otherwise.
	DstHBONEAddr netip.AddrPort
	DstService   string
	DstWorkload  string
	DstNamespace string
	DstIdentity  string // only over mTLS
	DstCluster   string

	Direction string // "outbound" (reporter source) or "inbound"
	// BytesSent and BytesRecv are from the connection's client's point of view at the
	// source ztunnel and from the server's at the destination, as ztunnel logs them.
	BytesSent, BytesRecv uint64
	Duration             time.Duration
	// Error is why the connection failed (the line is then at level error), "" if it did not.
	Error string
}

// Names are the pod names ztunnel puts in src.workload and dst.workload.
type Names struct {
	Src, Dst string
}

// FromResult makes the entry ztunnel logs for a closed connection: the names given, or
// the canonical services; identities only over mTLS; the byte counters unflipped for the
// source reporter (Istio counts its sent bytes from the server's side).
func FromResult(r metrics.Result, src, dst, hbone netip.AddrPort, names Names, err error) Entry {
	l := r.Labels
	mtls := l.ConnectionSecurityPolicy == metrics.MutualTLS
	e := Entry{
		Src: src, SrcWorkload: first(names.Src, l.SourceCanonicalService), SrcNamespace: l.SourceWorkloadNamespace, SrcCluster: l.SourceCluster,
		Dst: dst, DstHBONEAddr: hbone, DstService: l.DestinationService, DstWorkload: first(names.Dst, l.DestinationCanonicalService),
		DstNamespace: l.DestinationWorkloadNamespace, DstCluster: l.DestinationCluster,
		Direction: l.Reporter.Direction(),
		Duration:  r.Duration,
	}
	if mtls {
		e.SrcIdentity, e.DstIdentity = l.SourcePrincipal, l.DestinationPrincipal
	}
	if l.Reporter == metrics.Source {
		e.BytesSent, e.BytesRecv = r.Received, r.Sent
	} else {
		e.BytesSent, e.BytesRecv = r.Sent, r.Received
	}
	if err != nil {
		e.Error = err.Error()
	}
	return e
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Line is e as ztunnel prints it at time t:
//
//	2026-11-28T17:00:00.123456Z	info	access	connection complete	src.addr=... direction="outbound" bytes_sent=75 bytes_recv=1105 duration="4ms"
//
// Strings are quoted, addresses and counts are not, empty fields are left out.
func (e Entry) Line(t time.Time) string {
	var b strings.Builder
	level := "info"
	if e.Error != "" {
		level = "error"
	}
	b.WriteString(t.UTC().Format("2006-01-02T15:04:05.000000Z"))
	b.WriteString("\t" + level + "\taccess\tconnection complete\t")
	n := 0
	raw := func(k, v string) {
		if n > 0 {
			b.WriteByte(' ')
		}
		n++
		b.WriteString(k + "=" + v)
	}
	quoted := func(k, v string) {
		if v != "" {
			raw(k, strconv.Quote(v))
		}
	}
	raw("src.addr", e.Src.String())
	quoted("src.workload", e.SrcWorkload)
	quoted("src.namespace", e.SrcNamespace)
	quoted("src.identity", e.SrcIdentity)
	quoted("src.cluster", e.SrcCluster)
	raw("dst.addr", e.Dst.String())
	if e.DstHBONEAddr.IsValid() {
		raw("dst.hbone_addr", e.DstHBONEAddr.String())
	}
	quoted("dst.service", e.DstService)
	quoted("dst.workload", e.DstWorkload)
	quoted("dst.namespace", e.DstNamespace)
	quoted("dst.identity", e.DstIdentity)
	quoted("dst.cluster", e.DstCluster)
	quoted("direction", e.Direction)
	raw("bytes_sent", strconv.FormatUint(e.BytesSent, 10))
	raw("bytes_recv", strconv.FormatUint(e.BytesRecv, 10))
	raw("duration", strconv.Quote(strconv.FormatInt(e.Duration.Milliseconds(), 10)+"ms"))
	quoted("error", e.Error)
	return b.String()
}

// Record is one parsed ztunnel log line.
type Record struct {
	Time    string
	Level   string
	Target  string
	Message string
	// Fields are the key=value fields, quotes removed.
	Fields map[string]string
}

// Parse reads one ztunnel log line (time, level, target, message, fields, tab-separated).
// It reports false for a line that is not one.
func Parse(line string) (Record, bool) {
	parts := strings.SplitN(line, "\t", 5)
	if len(parts) < 4 {
		return Record{}, false
	}
	r := Record{Time: parts[0], Level: parts[1], Target: parts[2], Message: parts[3], Fields: map[string]string{}}
	if len(parts) == 4 {
		return r, true
	}
	s := parts[4]
	for s != "" {
		s = strings.TrimLeft(s, " ")
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return Record{}, false
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return Record{}, false
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			v, rest = rest[:end], rest[end:]
		}
		r.Fields[k] = v
		s = rest
	}
	return r, true
}
