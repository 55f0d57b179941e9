// Package fortio is the fortio persona of the built-in app: the fortio/fortio image that
// Istio's circuit-breaking task deploys, as that task uses it. Its server answers with
// fortio's echo (EchoHandler), and `fortio load` and `fortio curl` (run in the pod with
// `meshlab exec`) print what the fortio binary prints (the "Code 200 : N (x %)" summary
// lines, fortio's latency histogram and percentiles).
//
// It uses fortio's own periodic runner (fortio.org/fortio/periodic) and histograms
// (fortio.org/fortio/stats), with an HTTP client and echo handler of its own on net/http,
// and not fortio's fhttp: fhttp imports fortio.org/scli, fortio.org/cli and
// golang.org/x/crypto/x509roots/fallback, whose package initialisation (a parsed
// certificate bundle, dynamic flags, a 256 KiB payload) every process of the one binary
// would pay for at start (docs/ARCHITECTURE.md has the figures).
package fortio

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/periodic"
	"fortio.org/fortio/stats"
	"fortio.org/fortio/version"
	flog "fortio.org/log"
)

// HTTPPort is the port fortio's server answers HTTP on (its image's http-fortio port).
const HTTPPort = 8080

// shutdownGrace is how long in-flight requests may finish once Serve's context ends.
const shutdownGrace = 5 * time.Second

// Serve runs fortio's server as the image's default command does, for the HTTP part the
// tasks use: fortio's echo handler on HTTPPort, every other path included (fortio's echo
// answers any path). ports are the container's declared ports; HTTPPort must be one of
// them. The image's other ports (8079 gRPC ping, 8078 redirect, 8077 TCP echo) are not
// served, and Serve says so in its log. It returns when ctx ends.
func Serve(ctx context.Context, ports []uint16, log *slog.Logger) error {
	serveHTTP := false
	for _, p := range ports {
		if p == HTTPPort {
			serveHTTP = true
		} else {
			log.Info("fortio persona: port not served (only fortio's HTTP echo on 8080 is)", "port", p)
		}
	}
	if !serveHTTP {
		return fmt.Errorf("fortio persona: the container declares ports %v; fortio's server answers HTTP on %d", ports, HTTPPort)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(HTTPPort))
	if err != nil {
		return fmt.Errorf("fortio persona: listen: %w", err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(EchoHandler),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("fortio server listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("fortio persona: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fortio persona: serve: %w", err)
	}
	return nil
}

// headerFlags collects repeated -H "Name: value" flags.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// options are the flags of `fortio load` and `fortio curl` that meshlab's fortio takes,
// with fortio's names and defaults.
type options struct {
	connections int
	qps         float64
	exactly     int64
	duration    time.Duration
	logLevel    string
	quiet       bool
	timeout     time.Duration
	percentiles string
	headers     headerFlags
}

func (o *options) flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fortio "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.connections, "c", 8, "number of connections/goroutine/threads")
	fs.Float64Var(&o.qps, "qps", 8, "queries per second or 0 for no wait/max qps")
	fs.Int64Var(&o.exactly, "n", 0, "run for exactly this number of calls instead of a duration")
	fs.DurationVar(&o.duration, "t", 5*time.Second, "how long to run the test or 0 to run until ^C")
	fs.StringVar(&o.logLevel, "loglevel", "Info", "log level: Debug, Verbose, Info, Warning, Error, Critical, Fatal")
	fs.BoolVar(&o.quiet, "quiet", false, "quiet mode, sets loglevel to Error (quietly) to reduce the output")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "connection and read timeout value (for http)")
	fs.StringVar(&o.percentiles, "p", "50,75,90,99,99.9", "list of percentiles to calculate")
	fs.Var(&o.headers, "H", "additional HTTP header(s) (repeatable)")
	return fs
}

// defaultTimeout is fortio's -timeout default (fhttp.HTTPReqTimeOutDefaultValue).
const defaultTimeout = 3 * time.Second

// fortioMu serializes Main: fortio's logger and its defaults are process-wide.
var fortioMu sync.Mutex

// Main runs `fortio ARGS...` as the fortio binary of the image does, for the load and
// curl commands (and version), writing to stdout and stderr as fortio does: load's report
// to stderr, curl's body to stdout and its headers to stderr. It returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fortioMu.Lock()
	defer fortioMu.Unlock()
	if len(args) == 0 {
		fmt.Fprintln(stderr, "fortio: missing command: meshlab's fortio runs `fortio load` and `fortio curl` (and `fortio version`)")
		return 1
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, version.Short())
		return 0
	case "load", "curl":
	default:
		fmt.Fprintf(stderr, "fortio: command %q is not one meshlab's fortio runs (load, curl, version)\n", cmd)
		return 1
	}
	var o options
	fs := o.flags(cmd, stderr)
	if err := fs.Parse(rest); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "Error: fortio %s needs a URL or destination\n", cmd)
		return 1
	}
	url := fs.Arg(0)
	flog.SetOutput(stderr)
	if o.quiet {
		o.logLevel = "Error"
	}
	if _, err := flog.ValidateLevel(o.logLevel); err != nil {
		fmt.Fprintf(stderr, "fortio: -loglevel %q: %v\n", o.logLevel, err)
		return 1
	}
	_ = flog.SetLogLevelStr(o.logLevel)

	copts, err := newClientOptions(url, o.timeout, o.headers)
	if err != nil {
		fmt.Fprintf(stderr, "fortio: %v\n", err)
		return 1
	}
	if cmd == "curl" {
		return curl(copts, stdout, stderr)
	}
	percentiles, err := parsePercentiles(o.percentiles)
	if err != nil {
		fmt.Fprintf(stderr, "fortio: -p %q: %v\n", o.percentiles, err)
		return 1
	}
	return load(copts, &o, percentiles, stderr)
}

// curl fetches once, as `fortio curl`: the status line and headers to stderr, the body
// to stdout, exit 1 on a status other than 200.
func curl(o *clientOptions, stdout, stderr io.Writer) int {
	c := newClient(0, o, stats.NewHistogram(0, periodic.DefaultRunnerOptions.Resolution))
	defer c.close()
	code, _, _ := c.fetch(context.Background(), stderr, stdout)
	if code != http.StatusOK {
		flog.Errf("Error status %d", code)
		return 1
	}
	return 0
}

// load runs fortio's HTTP load test and prints its report (fortio's own) to out.
func load(h *clientOptions, o *options, percentiles []float64, out io.Writer) int {
	qps := o.qps
	procs := runtime.GOMAXPROCS(0)
	fmt.Fprintf(out, "Fortio %s running at %g queries per second, %d->%d procs", version.Short(), qps, procs, procs)
	if o.exactly > 0 {
		fmt.Fprintf(out, ", for %d calls: %s\n", o.exactly, h.url)
	} else {
		fmt.Fprintf(out, ", for %v: %s\n", o.duration, h.url)
	}
	if qps <= 0 {
		qps = -1 // fortio: 0 on the command line is max qps
	}
	ro := periodic.RunnerOptions{
		QPS:         qps,
		Duration:    o.duration,
		NumThreads:  o.connections,
		Percentiles: percentiles,
		Out:         out,
		Exactly:     o.exactly,
	}
	res, err := runLoad(h, &ro)
	if err != nil {
		fmt.Fprintf(out, "Aborting because of %v\n", err)
		return 1
	}
	warmup := o.connections
	if o.exactly > 0 {
		warmup = 0
	}
	printAllDone(out, res, warmup)
	return 0
}

// parsePercentiles parses fortio's -p list, "50,75,99.9".
func parsePercentiles(s string) ([]float64, error) {
	var out []float64
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return nil, fmt.Errorf("percentile %q is not a number between 0 and 100", p)
		}
		out = append(out, f)
	}
	return out, nil
}
