package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// BenchmarkApplyConvergence measures the time from `meshlab apply` of a VirtualService to
// every proxy of the lab ACKing the new config (all types SYNCED, RDS on a new version),
// with 10, 50 and 100 proxies, and reports the median and p99; and the same of the
// `meshlab apply` process alone (apply-median-ms, apply-p99-ms: from its start to its
// exit, as kubectl apply returns once the object is stored). The apply alternates the
// weights of a 90/10 split, so every proxy's routes change on every apply. These times
// include the CLI's process start.
//
// Each iteration then applies the other split through the lab's API from this process
// (api-apply-*: the request alone; api-ack-*: from the request to the last proxy's RDS
// ACK, the discovery server's own time of it (TypeStatus.LastAck); api-seen-*: until
// the lab's `apply --wait` wait returned), without any CLI. Both waits are the lab's own
// (GET /v1/synced, judged per stream in the lab's process): the benchmark used to ask
// for every proxy's status every 2 ms, and answering that cost the lab more CPU than the
// push it measured. Run:
//
//	sudo go test ./e2e -run '^$' -bench ApplyConvergence -benchtime 20x
//
// MESHLAB_BENCH_PROXIES=100 runs one size only.
func BenchmarkApplyConvergence(b *testing.B) {
	testutil.RequireRoot(b)
	sizes := []int{10, 50, 100}
	if n, ok := benchProxies(b); ok {
		sizes = []int{n}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("proxies=%d", n), func(b *testing.B) {
			l, lc := startScaleLab(b, n)
			files := [2]string{filepath.Join(b.TempDir(), "a.yaml"), filepath.Join(b.TempDir(), "b.yaml")}
			for i, w := range []int{90, 10} {
				if err := os.WriteFile(files[i], []byte(fmt.Sprintf(splitTemplate, w, 100-w)), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			var samples, applies, apiApplies, apiAcks, apiSeen []time.Duration
			b.ResetTimer()
			for range b.N {
				d, a, err := applyAndWait(b, l.name, lc, files[0], n)
				if err != nil {
					b.Fatal(err)
				}
				samples, applies = append(samples, d), append(applies, a)
				data, err := os.ReadFile(files[1]) // the other split: every apply changes the routes
				if err != nil {
					b.Fatal(err)
				}
				a, d, seen, err := apiApplyAndWait(b, lc, string(data), n)
				if err != nil {
					b.Fatal(err)
				}
				apiApplies, apiAcks, apiSeen = append(apiApplies, a), append(apiAcks, d), append(apiSeen, seen)
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			for _, s := range []struct {
				prefix string
				ds     []time.Duration
			}{{"", samples}, {"apply-", applies}, {"api-apply-", apiApplies}, {"api-ack-", apiAcks}, {"api-seen-", apiSeen}} {
				sort.Slice(s.ds, func(i, j int) bool { return s.ds[i] < s.ds[j] })
				b.ReportMetric(ms(s.ds[len(s.ds)/2]), s.prefix+"median-ms")
				b.ReportMetric(ms(s.ds[(len(s.ds)*99)/100]), s.prefix+"p99-ms")
			}
		})
	}
}

const splitTemplate = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - route:
    - {destination: {host: backend, subset: v1}, weight: %d}
    - {destination: {host: backend, subset: v2}, weight: %d}
`

// scaleScenario is a frontend and n-1 backend pods in two versions, with the
// DestinationRule naming them.
func scaleScenario(n int) string {
	v1 := (n - 1) / 2
	return strings.Join([]string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: frontend}\nspec: {selector: {app: frontend}, ports: [{name: http, port: 8080}]}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: backend}\nspec: {selector: {app: backend}, ports: [{name: http, port: 8080}]}\n",
		"apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: frontend}\nspec: {labels: {app: frontend}, ports: [8080], app: {}}\n",
		fmt.Sprintf("apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: backend-v1}\nspec: {replicas: %d, labels: {app: backend, version: v1}, ports: [8080], app: {}}\n", v1),
		fmt.Sprintf("apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: backend-v2}\nspec: {replicas: %d, labels: {app: backend, version: v2}, ports: [8080], app: {}}\n", n-1-v1),
		"apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: backend}\nspec: {host: backend, subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]}\n",
	}, "---\n")
}

// benchProxies is MESHLAB_BENCH_PROXIES, the one lab size a scale benchmark is asked to
// run, and whether it was set.
func benchProxies(b *testing.B) (int, bool) {
	b.Helper()
	v := os.Getenv("MESHLAB_BENCH_PROXIES")
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 3 {
		b.Fatalf("MESHLAB_BENCH_PROXIES=%q: want a number >= 3", v)
	}
	return n, true
}

// startScaleLab starts a lab of scaleScenario(n), waiting for its pods as long as a large
// lab on a loaded machine takes (longer than up's default), and returns it with a client
// of its API.
func startScaleLab(b *testing.B, n int) (*runningLab, *api.Client) {
	b.Helper()
	scenario := filepath.Join(b.TempDir(), "scale.yaml")
	if err := os.WriteFile(scenario, []byte(scaleScenario(n)), 0o644); err != nil {
		b.Fatal(err)
	}
	wait := lab.ReadyTimeoutFor(n) + 4*time.Minute
	l := startLabWithin(b, wait+30*time.Second, "--timeout", wait.String(), scenario)
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	b.Cleanup(lc.Close)
	return l, lc
}

// applyAndWait runs `meshlab apply -f file` and returns the time until every one of n
// proxies runs the new config (the lab's own wait, as `apply --wait`), and the time the
// apply process took.
func applyAndWait(b *testing.B, name string, lc *api.Client, file string, n int) (converged, applied time.Duration, err error) {
	b.Helper()
	start := time.Now()
	if out, err := meshlab(b, "apply", "--name", name, "-f", file); err != nil {
		return 0, 0, fmt.Errorf("apply: %w\n%s", err, out)
	}
	applied = time.Since(start)
	if os.Getenv("MESHLAB_BENCH_VERBOSE") != "" {
		b.Logf("apply returned after %v", applied)
	}
	if err := lc.WaitSynced(b.Context(), 30*time.Second); err != nil {
		return 0, 0, err
	}
	converged = time.Since(start)
	st, err := lc.ProxyStatus(b.Context())
	if err != nil {
		return 0, 0, err
	}
	if len(st) != n {
		return 0, 0, fmt.Errorf("%d proxies, want %d", len(st), n)
	}
	return converged, applied, nil
}

// apiApplyAndWait applies yaml through the lab's API and returns how long the request
// took, the time from its start to the last of n proxies' ACK of a new RDS version (the
// discovery server's time of that ACK, LastAck) and the time until the lab's wait for
// every proxy to run it returned (seen).
func apiApplyAndWait(b *testing.B, lc *api.Client, yaml string, n int) (applied, acked, seen time.Duration, err error) {
	b.Helper()
	before, err := lc.ProxyStatus(b.Context())
	if err != nil {
		return 0, 0, 0, err
	}
	prev := map[string]string{}
	for _, ps := range before {
		prev[ps.Pod] = ps.Types["RDS"].Acked
	}
	start := time.Now()
	if _, err := lc.Apply(b.Context(), []api.ConfigFile{{Name: "split.yaml", Data: yaml}}); err != nil {
		return 0, 0, 0, fmt.Errorf("apply: %w", err)
	}
	applied = time.Since(start)
	if err := lc.WaitSynced(b.Context(), 30*time.Second); err != nil {
		return 0, 0, 0, err
	}
	seen = time.Since(start)
	st, err := lc.ProxyStatus(b.Context())
	if err != nil {
		return 0, 0, 0, err
	}
	if len(st) != n {
		return 0, 0, 0, fmt.Errorf("%d proxies, want %d", len(st), n)
	}
	var last time.Time
	for _, ps := range st {
		rds := ps.Types["RDS"]
		if rds.Acked == prev[ps.Pod] || rds.State() != "SYNCED" {
			return 0, 0, 0, fmt.Errorf("pod %s: RDS %s after the wait, was %s", ps.Pod, rds.State(), prev[ps.Pod])
		}
		if rds.LastAck.After(last) {
			last = rds.LastAck
		}
	}
	return applied, last.Sub(start), seen, nil
}
