package fortio

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"

	"fortio.org/fortio/periodic"
	"fortio.org/fortio/stats"
	flog "fortio.org/log"
)

// runner is one load goroutine's state: its client and what it saw (fortio's
// HTTPRunnerResults per thread).
type runner struct {
	c           *client
	codes       map[int]int64
	sizes       *stats.Histogram
	headerSizes *stats.Histogram
}

// Run is periodic.Runnable: one request, recorded.
func (r *runner) Run(ctx context.Context, _ periodic.ThreadID) (bool, string) {
	code, size, headerSize := r.c.fetch(ctx, nil, nil)
	r.codes[code]++
	r.sizes.Record(float64(size))
	r.headerSizes.Record(float64(headerSize))
	return codeIsOK(code), strconv.Itoa(code)
}

// runLoad is fortio's RunHTTPTest on fortio's periodic runner: a client per goroutine
// (with a warm-up request each unless -n is given), then the run, then the report
// fortio prints after the runner's own (sockets and addresses per connection, connection
// times, "Code 200 : N (x %)" lines, header and total sizes) to ro.Out.
func runLoad(o *clientOptions, ro *periodic.RunnerOptions) (periodic.RunnerResults, error) {
	ro.RunType = "HTTP"
	flog.S(flog.Info, "Starting http test", flog.Str("url", o.url), flog.Attr("threads", ro.NumThreads),
		flog.Str("qps", fmt.Sprintf("%.1f", ro.QPS)), flog.Str("warmup", "parallel"))
	r := periodic.NewPeriodicRunner(ro)
	opts := r.Options()
	defer opts.Abort()
	out := opts.Out
	numThreads := opts.NumThreads
	state := make([]*runner, numThreads)
	for i := range numThreads {
		state[i] = &runner{
			c:           newClient(i, o, stats.NewHistogram(opts.Offset.Seconds(), opts.Resolution)),
			codes:       map[int]int64{},
			sizes:       stats.NewHistogram(0, 100),
			headerSizes: stats.NewHistogram(0, 5),
		}
		opts.Runners[i] = state[i]
	}
	defer func() {
		for _, s := range state {
			s.c.close()
		}
	}()
	if opts.Exactly <= 0 {
		errs := make(chan error, numThreads)
		for i, s := range state {
			go func() {
				code, size, _ := s.c.fetch(context.Background(), nil, nil)
				if !codeIsOK(code) {
					errs <- fmt.Errorf("error %d for %s (%d bytes)", code, o.url, size)
					return
				}
				if i == 0 {
					flog.LogVf("first hit of url %s: status %03d, total %d", o.url, code, size)
				}
				errs <- nil
			}()
		}
		var first error
		for range numThreads {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			opts.Stop.RecordStart() // the runner's start, so that Abort does not wait for it
			return periodic.RunnerResults{}, first
		}
	}
	res := r.Run()

	numThreads = res.NumThreads // the runner uses fewer goroutines than -c when -n < 2c
	connStats := stats.NewHistogram(opts.Offset.Seconds(), opts.Resolution)
	sizes, headerSizes := stats.NewHistogram(0, 100), stats.NewHistogram(0, 5)
	codes := map[int]int64{}
	addrCount := map[string]int{}
	var sockets int64
	fmt.Fprintf(out, "# Socket and IP used for each connection:\n")
	for i, s := range state[:numThreads] {
		s.c.mu.Lock()
		fmt.Fprintf(out, "[%d] %3d socket used, resolved to %s", i, s.c.sockets, s.c.addrs.AggregateAndToString(addrCount))
		s.c.connStats.Counter.Print(out, ", connection timing")
		sockets += s.c.sockets
		connStats.Transfer(s.c.connStats)
		s.c.mu.Unlock()
		for k, v := range s.codes {
			codes[k] += v
		}
		sizes.Transfer(s.sizes)
		headerSizes.Transfer(s.headerSizes)
	}
	if flog.Log(flog.Info) {
		connStats.Export().CalcPercentiles(opts.Percentiles).Print(out, "Connection time histogram (s)")
	} else if flog.Log(flog.Warning) {
		connStats.Counter.Print(out, "Connection time (s)")
	}
	addrs := slices.Collect(maps.Keys(addrCount))
	sort.Slice(addrs, func(i, j int) bool {
		if addrCount[addrs[i]] != addrCount[addrs[j]] {
			return addrCount[addrs[i]] > addrCount[addrs[j]]
		}
		return addrs[i] < addrs[j]
	})
	total := float64(res.DurationHistogram.Count)
	fmt.Fprintf(out, "Sockets used: %d (for perfect keepalive, would be %d)\n", sockets, opts.NumThreads)
	fmt.Fprintf(out, "Uniform: %t, Jitter: %t, Catchup allowed: %t\n", res.Uniform, res.Jitter, !res.NoCatchUp)
	fmt.Fprintf(out, "IP addresses distribution:\n")
	for _, a := range addrs {
		fmt.Fprintf(out, "%s: %d\n", a, addrCount[a])
	}
	for _, k := range slices.Sorted(maps.Keys(codes)) {
		fmt.Fprintf(out, "Code %3d : %d (%.1f %%)\n", k, codes[k], 100*float64(codes[k])/total)
	}
	if flog.LogVerbose() {
		headerSizes.Export().Print(out, "Response Header Sizes Histogram")
		sizes.Export().Print(out, "Response Body/Total Sizes Histogram")
	} else if flog.Log(flog.Warning) {
		headerSizes.Counter.Print(out, "Response Header Sizes")
		sizes.Counter.Print(out, "Response Body/Total Sizes")
	}
	opts.ReleaseRunners()
	return res, nil
}

// printAllDone is the last line fortio's load command prints.
func printAllDone(out io.Writer, res periodic.RunnerResults, warmup int) {
	fmt.Fprintf(out, "All done %d calls (plus %d warmup) %.3f ms avg, %.1f qps\n",
		res.DurationHistogram.Count, warmup, 1000*res.DurationHistogram.Avg, res.ActualQPS)
}
