package trace

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
)

// accessLogEntry is what a trace reads from one proxy's access log line for its request.
type accessLogEntry struct {
	Raw                   string
	ResponseCode          int
	ResponseFlags         string
	DurationMs            *int
	UpstreamServiceTimeMs *int
	UpstreamHost          string
	UpstreamCluster       string
	RouteName             string
}

// istioTextLine matches a line of Istio's default TEXT access log format
// (controlplane/xds.IstioTextLogFormat).
var istioTextLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\[[^\]]*\] "[^"]*" (\S+) (\S+) \S+ \S+ "[^"]*" \S+ \S+ (\S+) (\S+) "[^"]*" "[^"]*" "[^"]*" "[^"]*" "([^"]*)" (\S+) \S+ \S+ \S+ \S+ (\S+)$`)
})

// parseAccessLogLine reads the fields a trace needs from a line in Istio's default TEXT
// or JSON format; a line in another format keeps only Raw.
func parseAccessLogLine(line string) accessLogEntry {
	e := accessLogEntry{Raw: line}
	dash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	num := func(s string) *int {
		if n, err := strconv.Atoi(s); err == nil {
			return &n
		}
		return nil
	}
	if strings.HasPrefix(line, "{") {
		var f map[string]any
		if json.Unmarshal([]byte(line), &f) != nil {
			return e
		}
		str := func(k string) string {
			switch v := f[k].(type) {
			case string:
				return dash(v)
			case float64:
				return strconv.FormatInt(int64(v), 10)
			}
			return ""
		}
		if c := num(str("response_code")); c != nil {
			e.ResponseCode = *c
		}
		e.ResponseFlags, e.UpstreamHost = str("response_flags"), str("upstream_host")
		e.UpstreamCluster, e.RouteName = str("upstream_cluster"), str("route_name")
		e.DurationMs, e.UpstreamServiceTimeMs = num(str("duration")), num(str("upstream_service_time"))
		return e
	}
	m := istioTextLine().FindStringSubmatch(line)
	if m == nil {
		return e
	}
	if c := num(m[1]); c != nil {
		e.ResponseCode = *c
	}
	e.ResponseFlags = dash(m[2])
	e.DurationMs, e.UpstreamServiceTimeMs = num(m[3]), num(m[4])
	e.UpstreamHost, e.UpstreamCluster, e.RouteName = dash(m[5]), dash(m[6]), dash(m[7])
	return e
}

// accessLogWait bounds how long a trace waits for a proxy to write its line: a proxy
// logs an HTTP request when its stream ends, just after the client has the answer.
const accessLogWait = 2 * time.Second

// logTail bounds how much of a log file's end is searched for the request's line.
const logTail = 256 << 10

// findAccessLog polls the tail of the access log file at path for the line carrying
// requestID, until it appears or accessLogWait (or ctx) ends.
func findAccessLog(ctx context.Context, path, requestID string) (accessLogEntry, bool) {
	ctx, cancel := context.WithTimeout(ctx, accessLogWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if line, ok := lineWithID(path, requestID); ok {
			return parseAccessLogLine(line), true
		}
		select {
		case <-ctx.Done():
			return accessLogEntry{}, false
		case <-tick.C:
		}
	}
}

// lineWithID returns the last line of the file's tail containing id.
func lineWithID(path, id string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > logTail {
		_, _ = f.Seek(st.Size()-logTail, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", false
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], id) {
			return lines[i], true
		}
	}
	return "", false
}

// traceAccessLogs finds, in parallel, the access log line of the request id in each
// sidecar pod's proxy log; pods without a line (or logs off: meshPath "") are absent.
func traceAccessLogs(ctx context.Context, d Deps, meshPath, id string, pods ...*model.Pod) map[string]*accessLogEntry {
	out := map[string]*accessLogEntry{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range pods {
		file := ""
		if p != nil && p.Sidecar.Inject {
			file = d.AccessLogFile(p.Key(), meshPath)
		}
		if file == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, ok := findAccessLog(ctx, file, id); ok {
				mu.Lock()
				out[p.Key()] = &e
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// applyAccessLog fills a proxy hop from its access log line, the proxy's own account of
// the request: the route name, cluster and (outbound) upstream host it chose, its
// duration and response flags. What the line does not say keeps what the config dump and
// stats deltas gave. rcs are the route configurations of the hop's filter chain, where the
// route's origin is looked up.
func applyAccessLog(h *api.TraceHop, e *accessLogEntry, d proxyDump, rcs []dumpRouteConfig, outbound bool) {
	if e == nil {
		return
	}
	h.AccessLog = e.Raw
	h.DurationMs = e.DurationMs
	h.ResponseFlags = e.ResponseFlags
	if e.UpstreamServiceTimeMs != nil && h.UpstreamServiceTimeMs == nil {
		h.UpstreamServiceTimeMs = e.UpstreamServiceTimeMs
	}
	if c := e.UpstreamCluster; c != "" && (h.Cluster == nil || h.Cluster.Name != c) {
		h.Cluster = &api.TraceResource{Name: c, Origin: d.clusters[c].Metadata.origin()}
	}
	if r := e.RouteName; r != "" && (h.Route == nil || h.Route.Name != r) {
		h.Route = &api.TraceResource{Name: r, Origin: routeOrigin(rcs, r)}
	}
	if outbound && e.UpstreamHost != "" {
		h.Endpoint = e.UpstreamHost
	}
}

// routeOrigin returns the origin of the first route named name in the route
// configurations ("" when there is none).
func routeOrigin(rcs []dumpRouteConfig, name string) string {
	for _, rc := range rcs {
		for _, vh := range rc.VirtualHosts {
			for _, rt := range vh.Routes {
				if rt.Name == name {
					return rt.Metadata.origin()
				}
			}
		}
	}
	return ""
}
