package proxy

import (
	"bufio"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// BenchmarkConnectTerminateRoundTrip is a waypoint's first half in one process: an HTTP/2
// CONNECT into connect_terminate, handed to the internal listener main_internal, whose
// tcp_proxy goes to the original destination (a line echo server); each op is one line
// sent on the stream and its echo read back. It reports the process's CPU per op
// (cpu-us/op: user + system, what the proxy and the test's client and echo server spend),
// steadier than ns/op on a shared machine:
// go test ./dataplane/proxy -run '^$' -bench ConnectTerminateRoundTrip.
func BenchmarkConnectTerminateRoundTrip(b *testing.B) {
	backend := lineEchoServer(b)
	srv := newUnstartedForApply(b)
	clusters := []*anypb.Any{mustAnyT(b, staticInternalCluster(b, "main_internal", "main_internal")), mustAnyT(b, origDstCluster("orig", ""))}
	if err := srv.Apply(xdsclient.ClusterType, "1", clusters); err != nil {
		b.Fatal(err)
	}
	terminate := &listenerv3.Listener{Name: "connect_terminate", Address: socketAddr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{terminateHCM(b, "main_internal")}}}}
	inner := &listenerv3.Listener{
		Name:              "main_internal",
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAnyT(b, &origdstv3.OriginalDst{})}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcpProxy(b, "inner", "orig")}}},
	}
	if err := srv.Apply(xdsclient.ListenerType, "1", []*anypb.Any{mustAnyT(b, terminate), mustAnyT(b, inner)}); err != nil {
		b.Fatal(err)
	}
	addr, ok := srv.listeners.Addr("connect_terminate")
	if !ok {
		b.Fatal("connect_terminate not bound")
	}
	w, resp := connectStream(b, addr, backend.String())
	defer resp.Body.Close()
	defer w.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("CONNECT status %d, want 200", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	line := "GET / HTTP/1.1 through the waypoint, about a request's size\n"
	roundTrip := func() {
		if _, err := io.WriteString(w, line); err != nil {
			b.Fatal(err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != line {
			b.Fatalf("echo = %q, %v", got, err)
		}
	}
	roundTrip()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		roundTrip()
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}
