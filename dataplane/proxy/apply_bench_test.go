package proxy

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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
	path := writeBootstrap(b, b.TempDir(), staticBootstrap(b))
	opts, err := ParseArgs([]string{"-c", path, "--drain-time-s", "1"})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	var cpu time.Duration // the process's utime+stime while applying: the machine is shared
	for b.Loop() {
		b.StopTimer()
		srv, err := New(opts, log, nil)
		if err != nil {
			b.Fatal(err)
		}
		srv.xds = xdsclient.New(xdsclient.Options{Logger: log})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		<-srv.Started()
		before := processCPU(b)
		b.StartTimer()
		for _, r := range x {
			if err := srv.Apply(r.GetTypeUrl(), r.GetVersionInfo(), r.GetResources()); err != nil {
				b.Fatalf("%s refused: %v", r.GetTypeUrl(), err)
			}
		}
		b.StopTimer()
		cpu += processCPU(b) - before
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
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
