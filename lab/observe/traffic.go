package observe

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
)

// Limits of the traffic tool.
const (
	trafficParallel = 8
	trafficTimeout  = 5 * time.Second
	trafficBodyMax  = BodyMax
	trafficErrorMax = 5
)

// BodyMax bounds how much of an answer's body is read (the demo app's echo fits).
const BodyMax = 64 << 10

// SendTraffic is the lab's web.TrafficSender: it sends r.N requests (GET by default) from
// inside the pod's namespace as root, which the capture rules redirect to the pod's sidecar
// as they do the app's traffic. The URL's host is resolved with the lab's own name table
// (what the pod's DNS proxy answers), never the host's resolver.
func SendTraffic(ctx context.Context, d Deps, r api.TrafficRequest) (api.TrafficResult, error) {
	if err := r.Validate(); err != nil {
		return api.TrafficResult{}, fmt.Errorf("%w: %w", api.ErrBadTraffic, err)
	}
	m := d.Model()
	p := m.Pod(r.Pod)
	if p == nil {
		return api.TrafficResult{}, api.ErrUnknownPod
	}
	u, _ := url.Parse(r.URL) // Validate parsed it
	target, err := ResolveTarget(m, p, u)
	if err != nil {
		return api.TrafficResult{}, fmt.Errorf("%w: %w", api.ErrBadTraffic, err)
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialFrom(ctx, p.Key(), target.String())
		},
		MaxIdleConnsPerHost: trafficParallel,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{
		Transport:     tr,
		Timeout:       trafficTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	res := sendAllFrom(ctx, hc, r, r.N, p.Sidecar.Inject)
	d.Publish("traffic.sent", r.Pod, fmt.Sprintf("sent %d requests to %s: %s", r.N, r.URL, countsText(res.Statuses)),
		map[string]any{"url": r.URL, "n": r.N, "statuses": res.Statuses, "pods": res.Pods, "p50Ms": res.P50Ms})
	return res, nil
}

// ResolveTarget turns the URL's host into an address as seen from pod p: an IP literal as
// is, a name via the pod's name table (a service VIP).
func ResolveTarget(m *model.Model, p *model.Pod, u *url.URL) (netip.AddrPort, error) {
	port := uint16(80)
	if s := u.Port(); s != "" {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("url: port %q: %w", s, err)
		}
		port = uint16(n)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(ip, port), nil
	}
	vips := m.NameTable(p.Namespace)[host]
	if len(vips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("url: host %q is not a service pod %s can resolve", u.Hostname(), p.Key())
	}
	return netip.AddrPortFrom(vips[0], port), nil
}

// countsText renders counts as "503 x18, 200 x12": most first, then by key.
func countsText(counts map[string]int) string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s x%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// sendAll sends n requests (r's URL, method and headers) with a few in flight and
// summarises the answers, from a pod with a sidecar.
func sendAll(ctx context.Context, hc *http.Client, r api.TrafficRequest, n int) api.TrafficResult {
	return sendAllFrom(ctx, hc, r, n, true)
}

// sendAllFrom is sendAll from a pod with or without a sidecar (which tells who answered).
func sendAllFrom(ctx context.Context, hc *http.Client, r api.TrafficRequest, n int, sidecar bool) api.TrafficResult {
	res := api.TrafficResult{Statuses: map[string]int{}, Pods: map[string]int{}}
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, n)
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range min(trafficParallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				status, pod, hdr, d, err := sendOne(ctx, hc, r)
				mu.Lock()
				res.Sent++
				latencies = append(latencies, d)
				if err != nil {
					res.Statuses["error"]++
					res.AddAnswer("", api.AnsweredByNone, "error")
					if len(res.Errors) < trafficErrorMax {
						res.Errors = append(res.Errors, err.Error())
					}
				} else {
					res.Statuses[strconv.Itoa(status)]++
					res.Pods[pod]++
					res.AddAnswer(pod, api.AnsweredBy(hdr, pod, sidecar), strconv.Itoa(status))
					res.AddResponseHeaders(hdr)
				}
				mu.Unlock()
			}
		}()
	}
	for range n {
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	res.SortAnswers()
	slices.Sort(latencies)
	res.P50Ms, res.P90Ms, res.P99Ms = percentileMs(latencies, 50), percentileMs(latencies, 90), percentileMs(latencies, 99)
	if len(latencies) > 0 {
		res.MaxMs = Ms(latencies[len(latencies)-1])
	}
	return res
}

// sendOne sends one request and returns the status, the answering pod (as its answer
// names it), the response headers and the latency.
func sendOne(ctx context.Context, hc *http.Client, r api.TrafficRequest) (int, string, http.Header, time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, cmp.Or(r.Method, http.MethodGet), r.URL, nil)
	if err != nil {
		return 0, "", nil, 0, err
	}
	req.Header.Set("User-Agent", "meshlab-traffic")
	for name, value := range r.Headers {
		req.Header.Set(name, value)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, time.Since(start), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, trafficBodyMax))
	d := time.Since(start)
	if err != nil {
		return 0, "", nil, d, err
	}
	// The demo app names its pod "pod"; Bookinfo's reviews, "podname".
	var identity struct {
		Pod     string `json:"pod"`
		Podname string `json:"podname"`
	}
	_ = json.Unmarshal(body, &identity) // any other body counts under ""
	return resp.StatusCode, cmp.Or(identity.Pod, identity.Podname), resp.Header, d, nil
}

// percentileMs returns the p-th percentile (nearest rank) of sorted durations, in ms.
func percentileMs(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return Ms(sorted[max(rank, 1)-1])
}

// Ms is d in milliseconds, to the microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
