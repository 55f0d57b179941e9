package metrics

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// series are the counters of one label set.
type series struct {
	opened, closed, failed, sent, received atomic.Uint64
	// made says which families hold the series, as prometheus_client's get_or_create
	// makes it: opened, sent and received at open (even at zero), closed and failed at
	// close.
	made [5]atomic.Bool
}

const (
	famOpened = iota
	famClosed
	famReceived
	famSent
	famFailed
)

// Registry holds a ztunnel's TCP metrics. It is safe for concurrent use; the zero value is
// not: use New.
type Registry struct {
	mu     sync.RWMutex
	series map[Labels]*series
	dns    map[DNSLabels]*dnsSeries // dns.go
	// sockets are istio_tcp_sockets_open by reporter.
	sockets [2]atomic.Int64
}

// New is an empty registry.
func New() *Registry { return &Registry{series: map[Labels]*series{}} }

func (r *Registry) get(l Labels) *series {
	r.mu.RLock()
	s := r.series[l]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.series[l]; s == nil {
		s = &series{}
		r.series[l] = s
	}
	return s
}

// SocketOpened and SocketClosed move istio_tcp_sockets_open for a reporter.
func (r *Registry) SocketOpened(rep Reporter) { r.sockets[rep&1].Add(1) }

// SocketClosed is SocketOpened's undo.
func (r *Registry) SocketClosed(rep Reporter) { r.sockets[rep&1].Add(-1) }

// Conn is one connection's metrics from open to close, as ztunnel's ConnectionResult. Its
// byte counters are safe for concurrent use (the two copy directions); Close once.
type Conn struct {
	r      *Registry
	labels Labels
	open   *series
	start  time.Time
	sent   atomic.Uint64
	recv   atomic.Uint64
	closed atomic.Bool
}

// Open counts a connection opened with o's labels and returns its handle.
func (r *Registry) Open(o Open) *Conn {
	l := LabelsFor(o)
	s := r.get(l)
	s.opened.Add(1)
	s.made[famOpened].Store(true)
	s.made[famSent].Store(true)
	s.made[famReceived].Store(true)
	return &Conn{r: r, labels: l, open: s, start: time.Now()}
}

// Labels are the connection's labels (response_flags "-" until it closes).
func (c *Conn) Labels() Labels { return c.labels }

// AddSent counts n bytes copied from the upstream (server) side to the downstream
// (client): istio_tcp_sent_bytes_total, at either reporter, as ztunnel counts it.
func (c *Conn) AddSent(n int) {
	c.sent.Add(uint64(n)) //nolint:gosec // byte counts are never negative
	c.open.sent.Add(uint64(n))
}

// AddReceived counts n bytes copied from the downstream (client) side to the upstream:
// istio_tcp_received_bytes_total.
func (c *Conn) AddReceived(n int) {
	c.recv.Add(uint64(n)) //nolint:gosec // byte counts are never negative
	c.open.received.Add(uint64(n))
}

// Result is a closed connection, for its access log line.
type Result struct {
	Labels   Labels // with the closing response flag
	Sent     uint64 // upstream -> downstream bytes
	Received uint64 // downstream -> upstream bytes
	Duration time.Duration
}

// Close counts the connection closed with flag (FlagNone when it ended well) and, for a
// failure flag, failed; the closed series carries the flag, as ztunnel's does. It returns
// the result for the access log. A second Close returns the same figures and counts
// nothing.
func (c *Conn) Close(flag ResponseFlag) Result {
	l := c.labels
	if flag != "" {
		l.ResponseFlags = flag
	}
	res := Result{Labels: l, Sent: c.sent.Load(), Received: c.recv.Load(), Duration: time.Since(c.start)}
	if !c.closed.CompareAndSwap(false, true) {
		return res
	}
	s := c.r.get(l)
	s.closed.Add(1)
	s.made[famClosed].Store(true)
	if l.ResponseFlags.failed() {
		s.failed.Add(1)
		s.made[famFailed].Store(true)
	}
	return res
}

// family is one metric family in ztunnel's registration order.
// counterFamily is a counter family of the series type S: its name and help, the index
// of the made flag that says a series holds it, and how its value is read.
type counterFamily[S interface{ holds(int) bool }] struct {
	name, help string
	id         int
	value      func(S) uint64
}

var families = []counterFamily[*series]{
	{"istio_tcp_connections_opened", "The total number of TCP connections opened.", famOpened, func(s *series) uint64 { return s.opened.Load() }},
	{"istio_tcp_connections_closed", "The total number of TCP connections closed.", famClosed, func(s *series) uint64 { return s.closed.Load() }},
	{"istio_tcp_received_bytes", "The size of total bytes received during request in case of a TCP connection.", famReceived, func(s *series) uint64 { return s.received.Load() }},
	{"istio_tcp_sent_bytes", "The size of total bytes sent during response in case of a TCP connection.", famSent, func(s *series) uint64 { return s.sent.Load() }},
	{"istio_tcp_connections_failed", "The total number of TCP connections that failed to establish (unstable).", famFailed, func(s *series) uint64 { return s.failed.Load() }},
}

// WriteText writes the registry as ztunnel's /stats/prometheus does: OpenMetrics text
// (counters' samples end in _total, "# EOF" last), series sorted by their labels, each
// where ztunnel would have made it (opened, sent and received at open; closed and failed
// at close).
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.RLock()
	entries := byLabels(r.series, func(l Labels) string { return formatLabels(l.Pairs()) })
	r.mu.RUnlock()
	bw := bufio.NewWriter(w)
	writeCounters(bw, families, entries)
	bw.WriteString("# HELP istio_tcp_sockets_open The current number of open TCP sockets (unstable).\n# TYPE istio_tcp_sockets_open gauge\n")
	for _, rep := range []Reporter{Source, Destination} {
		if v := r.sockets[rep].Load(); v != 0 {
			bw.WriteString(`istio_tcp_sockets_open{reporter="` + rep.String() + `"} ` + strconv.FormatInt(v, 10) + "\n")
		}
	}
	r.writeDNS(bw)
	bw.WriteString("# EOF\n")
	return bw.Flush()
}

// holds reports whether the series is in the family of index id.
func (s *series) holds(id int) bool { return s.made[id].Load() }

// labelled is a series with its labels formatted.
type labelled[S any] struct {
	key string
	s   S
}

// byLabels lists the series of m in the order of their formatted labels, ztunnel's order
// (the caller holds the registry's lock).
func byLabels[K comparable, S any](m map[K]S, labels func(K) string) []labelled[S] {
	entries := make([]labelled[S], 0, len(m))
	for l, s := range m {
		entries = append(entries, labelled[S]{labels(l), s})
	}
	slices.SortFunc(entries, func(a, b labelled[S]) int { return strings.Compare(a.key, b.key) })
	return entries
}

// writeCounters writes counter families as ztunnel does: each family's HELP and TYPE,
// then the samples of the series that hold it.
func writeCounters[S interface{ holds(int) bool }](bw *bufio.Writer, fams []counterFamily[S], entries []labelled[S]) {
	for _, f := range fams {
		bw.WriteString("# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " counter\n")
		for _, e := range entries {
			if e.s.holds(f.id) {
				bw.WriteString(f.name + "_total" + e.key + " " + strconv.FormatUint(f.value(e.s), 10) + "\n")
			}
		}
	}
}

// formatLabels is {k="v",...} with the text format's escapes.
func formatLabels(pairs [][2]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p[0])
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(p[1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Handler serves the registry on ztunnel's metrics paths (/metrics, /stats/prometheus),
// with ztunnel's content types: OpenMetrics when the client asks for it, text otherwise.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/metrics" && req.URL.Path != "/stats/prometheus" {
			http.NotFound(w, req)
			return
		}
		ct := "text/plain; charset=utf-8"
		for _, a := range req.Header.Values("Accept") {
			for _, part := range strings.Split(a, ",") {
				mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
				if strings.EqualFold(mt, "application/openmetrics-text") {
					ct = "application/openmetrics-text;charset=utf-8;version=1.0.0"
				}
			}
		}
		w.Header().Set("Content-Type", ct)
		_ = r.WriteText(w)
	})
}
