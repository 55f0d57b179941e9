package proxy

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// sidecarXDS is one response per type, in the order ADS delivers them to a starting proxy.
type sidecarXDS []*discoveryv3.DiscoveryResponse

// loadSidecarXDS reads testdata/xds-sidecar-50svc.pb.gz: what meshlab's generator
// (controlplane/xds.Generate) sends the sidecar svc-00-0 of BenchmarkUpScale's lab (50
// Services x 2 replicas; 54 clusters, 50 load assignments, 3 listeners, 1 route
// configuration), as CDS, EDS, LDS and RDS DiscoveryResponses in the wire encoding, each
// preceded by its length as a varint; the listeners that bind are moved to 127.0.0.1:0.
// It is binary so that reading it decodes no resource type: the first Apply in a fresh
// process pays protobuf's per-type setup, as a starting proxy does.
func loadSidecarXDS(tb testing.TB) sidecarXDS {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "xds-sidecar-50svc.pb.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	var out sidecarXDS
	for len(data) > 0 {
		b, n := protowire.ConsumeBytes(data)
		if n < 0 {
			tb.Fatal(protowire.ParseError(n))
		}
		data = data[n:]
		r := &discoveryv3.DiscoveryResponse{}
		if err := proto.Unmarshal(b, r); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	want := []string{xdsclient.ClusterType, xdsclient.EndpointType, xdsclient.ListenerType, xdsclient.RouteType}
	if len(out) != len(want) {
		tb.Fatalf("%d responses, want %d", len(out), len(want))
	}
	for i, r := range out {
		if r.GetTypeUrl() != want[i] || len(r.GetResources()) == 0 {
			tb.Fatalf("response %d: %s with %d resources, want %s", i, r.GetTypeUrl(), len(r.GetResources()), want[i])
		}
	}
	return out
}

// BenchmarkApplySidecarXDS measures applying a 50-Service lab sidecar's first CDS, EDS,
// LDS and RDS to a fresh proxy, as a starting proxy does (issue 16: the largest part of
// the proxy's start CPU). The proxy's construction is not measured.
func BenchmarkApplySidecarXDS(b *testing.B) {
	x := loadSidecarXDS(b)
	opts := benchProxyOptions(b)
	b.ReportAllocs()
	var cpu time.Duration // the process's utime+stime while applying: the machine is shared
	for b.Loop() {
		b.StopTimer()
		srv, stop := runBenchProxy(b, opts)
		before := processCPU(b)
		b.StartTimer()
		applyAll(b, srv, x)
		b.StopTimer()
		cpu += processCPU(b) - before
		stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// benchProxyOptions are the options of a proxy with a static bootstrap.
func benchProxyOptions(b *testing.B) Options {
	b.Helper()
	path := writeBootstrap(b, b.TempDir(), staticBootstrap(b))
	opts, err := ParseArgs([]string{"-c", path, "--drain-time-s", "1"})
	if err != nil {
		b.Fatal(err)
	}
	return opts
}

// runBenchProxy runs a proxy with an xDS client that connects nowhere (the benchmark
// applies responses itself) until stop.
func runBenchProxy(b *testing.B, opts Options) (srv *Server, stop func()) {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	srv, err := New(opts, log, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv.xds = xdsclient.New(xdsclient.Options{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-srv.Started()
	return srv, func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// applyAll applies the responses in order.
func applyAll(b *testing.B, srv *Server, x sidecarXDS) {
	b.Helper()
	for _, r := range x {
		if err := srv.Apply(r.GetTypeUrl(), r.GetVersionInfo(), r.GetResources()); err != nil {
			b.Fatalf("%s refused: %v", r.GetTypeUrl(), err)
		}
	}
}

// processCPU returns the process's user and system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApplyRDSOneServiceChanged measures a running proxy applying an RDS update in
// which one virtual host changed, as a one-service VirtualService change reaches every
// sidecar (issue 30): the 50-Service lab sidecar's route configuration of
// testdata/xds-sidecar-50svc.pb.gz, whose first virtual host's route timeout alternates
// between two values on every apply.
func BenchmarkApplyRDSOneServiceChanged(b *testing.B) {
	x := loadSidecarXDS(b)
	srv, stop := runBenchProxy(b, benchProxyOptions(b))
	b.Cleanup(stop)
	applyAll(b, srv, x)
	rds := x[len(x)-1].GetResources()
	var variants [2][]*anypb.Any
	for i, timeout := range []time.Duration{3 * time.Second, 4 * time.Second} {
		for _, a := range rds {
			rc := &routev3.RouteConfiguration{}
			if err := a.UnmarshalTo(rc); err != nil {
				b.Fatal(err)
			}
			if len(rc.GetVirtualHosts()) > 1 {
				for _, r := range rc.GetVirtualHosts()[0].GetRoutes() {
					if ra := r.GetRoute(); ra != nil {
						ra.Timeout = durationpb.New(timeout)
					}
				}
			}
			v, err := anypb.New(rc)
			if err != nil {
				b.Fatal(err)
			}
			variants[i] = append(variants[i], v)
		}
	}
	b.ReportAllocs()
	before := processCPU(b)
	n := 0
	for b.Loop() {
		if err := srv.Apply(xdsclient.RouteType, fmt.Sprint("v", n), variants[n%2]); err != nil {
			b.Fatalf("refused: %v", err)
		}
		n++
	}
	b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(n), "cpu-us/op")
}
