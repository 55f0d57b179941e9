package proxy

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	secretgrpc "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
	"github.com/meshlab/meshlab/internal/testutil"
)

const sdsNode = "sidecar~127.0.0.1~backend-0.default~default.svc.cluster.local"

// testSDS is a go-control-plane SecretDiscoveryService on a unix socket, standing in for
// the agent's SDS server (Istio's workload-spiffe-uds socket).
type testSDS struct {
	t      testing.TB
	cache  cachev3.SnapshotCache
	socket string
}

func startSDS(tb testing.TB) *testSDS {
	tb.Helper()
	s := &testSDS{t: tb, socket: filepath.Join(tb.TempDir(), "sds.sock")}
	s.cache = cachev3.NewSnapshotCache(false, cachev3.IDHash{}, gcpLogger{tb})
	gs := grpc.NewServer()
	secretgrpc.RegisterSecretDiscoveryServiceServer(gs, serverv3.NewServer(context.Background(), s.cache, nil))
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	tb.Cleanup(func() { gs.Stop(); <-done })
	return s
}

func (s *testSDS) set(version string, secrets ...*tlsv3.Secret) {
	s.t.Helper()
	var res []cachetypes.Resource
	for _, sec := range secrets {
		res = append(res, sec)
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]cachetypes.Resource{resource.SecretType: res})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), sdsNode, snap); err != nil {
		s.t.Fatal(err)
	}
}

func staticTo(name string, addr *corev3.Address, http2 bool) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}, ConnectTimeout: durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}}}},
		}}},
	}
	if http2 {
		// As istio-agent's bootstrap asks for HTTP/2 to xds-grpc and sds-grpc.
		opts, err := anypb.New(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
				Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
			}},
		}})
		if err != nil {
			panic(err) // a well-formed message always marshals
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": opts}
	}
	return c
}

// TestSDSSecretsFromStaticClusterAndRotation runs the proxy with Istio's sds-grpc static
// cluster and a static mTLS listener: the server is not LIVE until the secrets arrive over SDS, /config_dump shows them
// with the key redacted, and a rotated certificate serves new handshakes while a connection
// made before the rotation keeps working.
func TestSDSSecretsFromStaticClusterAndRotation(t *testing.T) {
	ca := tlstest.NewCA(t)
	sds := startSDS(t)
	echo := testutil.EchoServer(t)
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon([]string{"istio-peer-exchange", "istio"}, tlstest.Prefix("spiffe://cluster.local/")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	boot := &bootstrapv3.Bootstrap{
		Node:  &corev3.Node{Id: sdsNode, Cluster: "backend.default"},
		Admin: &bootstrapv3.Admin{Address: socketAddr("127.0.0.1", 0)},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{
				staticTo("sds-grpc", &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: sds.socket}}}, true),
				staticTo("inbound|9000||", socketAddr("127.0.0.1", uint32(echo.Port())), false),
			},
			Listeners: []*listenerv3.Listener{{
				Name: "inbound", Address: socketAddr("127.0.0.1", 0),
				FilterChains: []*listenerv3.FilterChain{{TransportSocket: down, Filters: []*listenerv3.Filter{tcpProxy(t, "inbound|9000||", "inbound|9000||")}}},
			}},
		},
	}
	srv := startProxy(t, writeBootstrap(t, t.TempDir(), boot), nil)
	// Envoy's initial SDS fetch: the server is not LIVE before the listener's secrets.
	if code, _ := adminGet(t, srv, "/ready"); code != 503 {
		t.Fatalf("/ready = %d before the secrets arrived, want 503", code)
	}
	sds.set("1", ca.Leaf(t, "default", "spiffe://cluster.local/ns/default/sa/backend"), ca.Root("ROOTCA"))
	eventually(t, "LIVE once the secrets arrived", func() bool { c, _ := adminGet(t, srv, "/ready"); return c == 200 })
	eventually(t, "secrets in /config_dump", func() bool {
		_, body := adminGet(t, srv, "/config_dump")
		return strings.Contains(body, `"trusted_ca"`) && strings.Contains(body, `"certificate_chain"`)
	})
	_, dump := adminGet(t, srv, "/config_dump")
	if !strings.Contains(dump, `"inline_string": "[redacted]"`) || strings.Count(dump, "inline_bytes") != 2 {
		t.Fatalf("/config_dump does not redact the private key:\n%s", dump)
	}
	if code, certs := adminGet(t, srv, "/certs"); code != 200 || !strings.Contains(certs, `"uri": "spiffe://cluster.local/ns/default/sa/backend"`) || !strings.Contains(certs, `"ca_cert"`) {
		t.Fatalf("/certs = %d:\n%s", code, certs)
	}
	in, _ := srv.ListenerAddr("inbound")
	client, err := tlsctx.Compile(tlstest.Socket(t, &tlsv3.UpstreamTlsContext{
		CommonTlsContext: tlstest.IstioCommon([]string{"istio"}, tlstest.Exact("spiffe://cluster.local/ns/default/sa/backend")),
	}), false)
	if err != nil {
		t.Fatal(err)
	}
	cst := tlsctx.NewStore()
	for _, s := range []*tlsv3.Secret{ca.Leaf(t, "default", "spiffe://cluster.local/ns/default/sa/frontend"), ca.Root("ROOTCA")} {
		sec, err := tlsctx.CompileSecret(s, "1")
		if err != nil {
			t.Fatal(err)
		}
		cst.Set(sec)
	}
	dial := func() (net.Conn, *x509.Certificate) {
		t.Helper()
		raw, err := net.Dial("tcp", in.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Close() })
		tc, err := client.Handshake(context.Background(), raw, cst, stats.NewStore().Root())
		if err != nil {
			t.Fatal(err)
		}
		return tc, tc.ConnectionState().PeerCertificates[0]
	}
	echoes := func(c net.Conn, msg string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo %q: got %q, %v", msg, buf, err)
		}
	}
	old, oldCert := dial()
	echoes(old, "before")
	sds.set("2", ca.Leaf(t, "default", "spiffe://cluster.local/ns/default/sa/backend"), ca.Root("ROOTCA"))
	eventually(t, "the rotated certificate on a new handshake", func() bool {
		c, cert := dial()
		defer c.Close()
		return cert.SerialNumber.Cmp(oldCert.SerialNumber) != 0
	})
	echoes(old, "after-rotation")
	// The server finishes its TLS 1.3 handshake after the client does: poll.
	eventually(t, "listener.127.0.0.1_0.ssl.handshake >= 2", func() bool {
		return srv.StatsStore().Value("listener.127.0.0.1_0.ssl.handshake") >= 2
	})
}

// TestSecretsOverADS pins SDS over the ADS stream: a Secret response is applied by name,
// an invalid one is NACKed naming the secret and the field, and the good one stays.
func TestSecretsOverADS(t *testing.T) {
	ca := tlstest.NewCA(t)
	srv := newUnstartedForApply(t)
	good := []*anypb.Any{mustAnyT(t, ca.Leaf(t, "default", "spiffe://cluster.local/ns/default/sa/web")), mustAnyT(t, ca.Root("ROOTCA"))}
	if err := srv.Apply(xdsclient.SecretType, "1", good); err != nil {
		t.Fatal(err)
	}
	bad := ca.Root("ROOTCA")
	bad.GetValidationContext().TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/ca.pem"}}
	err := srv.Apply(xdsclient.SecretType, "2", []*anypb.Any{mustAnyT(t, bad)})
	if err == nil || !strings.Contains(err.Error(), "secret 'ROOTCA': validation_context.trusted_ca.filename: field is not supported") {
		t.Fatalf("NACK = %v", err)
	}
	_, dump := adminGet(t, srv, "/config_dump")
	if !strings.Contains(dump, `"version_info": "1"`) || !strings.Contains(dump, `"trusted_ca"`) {
		t.Fatalf("secrets dump after the NACK:\n%s", dump)
	}
}
