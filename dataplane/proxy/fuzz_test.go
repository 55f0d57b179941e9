package proxy

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// FuzzApplyDiscoveryResponse feeds DiscoveryResponse bytes to the proxy's xDS apply
// path, as the ADS stream would deliver them: whatever arrives must be applied or NACKed
// without a panic, and a NACKed response must leave the last applied version in force.
// The seed corpus in testdata/fuzz/FuzzApplyDiscoveryResponse holds one valid response
// of each type.
func FuzzApplyDiscoveryResponse(f *testing.F) {
	for _, typeURL := range []string{xdsclient.ClusterType, xdsclient.EndpointType, xdsclient.ListenerType, xdsclient.RouteType} {
		b, err := proto.Marshal(&discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: "v0"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	srv := startQuietForApply(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		// Keep the fuzzer inside the sandbox: no files written by access logs, no DNS
		// lookups, no SDS file reads, and listeners only on 127.0.0.1:0.
		if bytes.Contains(data, []byte("access_log")) {
			t.Skip("access logs may write files")
		}
		var resp discoveryv3.DiscoveryResponse
		if err := proto.Unmarshal(data, &resp); err != nil {
			t.Skip("not a DiscoveryResponse")
		}
		if resp.GetTypeUrl() == xdsclient.SecretType {
			t.Skip("secrets may name files")
		}
		for _, a := range resp.GetResources() {
			if !confine(a) {
				t.Skip("resource would leave the sandbox")
			}
		}
		typeURL := resp.GetTypeUrl()
		before := srv.dumpVersion(typeURL)
		if err := srv.Apply(typeURL, resp.GetVersionInfo(), resp.GetResources()); err != nil {
			if after := srv.dumpVersion(typeURL); after != before {
				t.Fatalf("a NACKed response (%v) changed the applied version from %q to %q", err, before, after)
			}
		}
	})
}

// startQuietForApply is newUnstartedForApply with a discarding logger: a fuzz target
// must not log through the *testing.F.
func startQuietForApply(f *testing.F) *Server {
	f.Helper()
	opts, err := ParseArgs([]string{"-c", writeBootstrap(f, f.TempDir(), staticBootstrap(f)), "--drain-time-s", "1"})
	if err != nil {
		f.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	srv, err := New(opts, quiet, nil)
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	f.Cleanup(func() {
		cancel()
		<-done
	})
	<-srv.Started()
	srv.xds = xdsclient.New(xdsclient.Options{Logger: quiet})
	return srv
}

// confine rewrites a listener's address to 127.0.0.1:0 and reports false for what the
// fuzzer must not apply: DNS clusters.
func confine(a *anypb.Any) bool {
	switch a.GetTypeUrl() {
	case xdsclient.ListenerType:
		var l listenerv3.Listener
		if a.UnmarshalTo(&l) != nil {
			return true // refused by Apply
		}
		l.Address = socketAddr("127.0.0.1", 0)
		l.AdditionalAddresses = nil
		b, err := proto.Marshal(&l)
		if err != nil {
			return false
		}
		a.Value = b
	case xdsclient.ClusterType:
		var c clusterv3.Cluster
		if a.UnmarshalTo(&c) != nil {
			return true
		}
		switch c.GetType() {
		case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
			return false
		}
	}
	return true
}

// dumpVersion returns the version of the last applied response of typeURL.
func (s *Server) dumpVersion(typeURL string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if td, ok := s.dyn[typeURL]; ok {
		return td.version
	}
	return ""
}
