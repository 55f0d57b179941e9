package proxy

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// sidecarXDS is one response per type, in the order ADS delivers them to a starting proxy.
type sidecarXDS []struct {
	typeURL   string
	resources []*anypb.Any
}

// loadSidecarXDS reads testdata/xds-sidecar-50svc.json.gz: what meshlab's generator sends
// the sidecar svc-00-0 of BenchmarkUpScale's lab (50 Services x 2 replicas; 54 clusters,
// 50 load assignments, 3 listeners, 1 route configuration), written as the contract
// files are. Listeners that bind are moved to 127.0.0.1:0.
func loadSidecarXDS(tb testing.TB) sidecarXDS {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "xds-sidecar-50svc.json.gz"))
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
	var doc map[string][]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		tb.Fatal(err)
	}
	var out sidecarXDS
	for _, step := range []struct {
		key, typeURL string
		newMsg       func() protoMessage
	}{
		{"clusters", xdsclient.ClusterType, func() protoMessage { return &clusterv3.Cluster{} }},
		{"endpoints", xdsclient.EndpointType, func() protoMessage { return &endpointv3.ClusterLoadAssignment{} }},
		{"listeners", xdsclient.ListenerType, func() protoMessage { return &listenerv3.Listener{} }},
		{"routes", xdsclient.RouteType, func() protoMessage { return &routev3.RouteConfiguration{} }},
	} {
		var anys []*anypb.Any
		for _, raw := range doc[step.key] {
			m := step.newMsg()
			if err := protojson.Unmarshal(raw, m); err != nil {
				tb.Fatalf("%s: %v", step.key, err)
			}
			if l, ok := m.(*listenerv3.Listener); ok && (l.GetBindToPort() == nil || l.GetBindToPort().GetValue()) {
				l.Address = socketAddr("127.0.0.1", 0)
			}
			a, err := anypb.New(m)
			if err != nil {
				tb.Fatal(err)
			}
			anys = append(anys, a)
		}
		if len(anys) == 0 {
			tb.Fatalf("no %s in the sidecar's xDS", step.key)
		}
		out = append(out, struct {
			typeURL   string
			resources []*anypb.Any
		}{step.typeURL, anys})
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
			if err := srv.Apply(r.typeURL, "v1", r.resources); err != nil {
				b.Fatalf("%s refused: %v", r.typeURL, err)
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
