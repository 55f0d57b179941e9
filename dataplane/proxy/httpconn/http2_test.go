package httpconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/internal/testutil"
)

// h2cBackend is an upstream speaking h2c with prior knowledge (and HTTP/1.1).
func h2cBackend(tb testing.TB, h http.HandlerFunc) string {
	tb.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	tb.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// h2Cluster is a static cluster with Envoy's explicit HTTP/2 upstream protocol options.
func h2Cluster(t *testing.T, name string, cb *clusterv3.CircuitBreakers, hosts ...string) *cluster.Config {
	t.Helper()
	opts := mustAny(t, &upstreamhttpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
		}},
	})
	cfg := withCluster(t, &clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": opts},
		CircuitBreakers:               cb,
	}, hosts...)
	if !cfg.HTTP2 {
		t.Fatal("cluster with http2_protocol_options did not compile to HTTP2")
	}
	return cfg
}

// h2Proxy serves an HCM whose routes send /h1 to cluster "h1" and everything else to
// cluster "h2"; tlsCfg, when set, terminates TLS first as the listener does.
type h2Proxy struct {
	addr    string
	store   *stats.Store
	logPath string
}

func newH2Proxy(t *testing.T, clusters []*cluster.Config, draining <-chan struct{}, tlsCfg *tls.Config, drainTimeout time.Duration) *h2Proxy {
	t.Helper()
	p := &h2Proxy{store: stats.NewStore(), logPath: filepath.Join(t.TempDir(), "access.log")}
	cm := cluster.NewManager(p.store)
	cm.AddStatic(clusters)
	t.Cleanup(cm.Close)
	cfg := compileTestHCM(t, p.logPath, routeTo(prefix("/h1"), to("h1")), routeTo(prefix("/"), to("h2")))
	cfg.DrainTimeout = drainTimeout
	deps := Deps{Routes: NewRouteStore(), Clusters: cm, Stats: p.store, Logger: testutil.Logger(t), Draining: draining}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				conn := c
				if tlsCfg != nil {
					tc := tls.Server(c, tlsCfg)
					if err := tc.HandshakeContext(ctx); err != nil {
						return
					}
					conn = tlsctx.HTTP1Conn{Conn: tc} // as the listener hands TLS to the HCM
				}
				ServeConn(ctx, cfg, deps, conn, Downstream{})
			})
		}
	})
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
	p.addr = ln.Addr().String()
	return p
}

func compileTestHCM(t *testing.T, logPath string, routes ...*routev3.Route) *Config {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "lab",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: routes}}}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}},
		},
		AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{
			TypedConfig: mustAny(t, &filev3.FileAccessLog{Path: logPath})}}},
	}
	cfg, err := Compile(mustAny(t, hcm))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// h2cClient speaks HTTP/2 with prior knowledge over plaintext.
func h2cClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func doGet(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("TE", "trailers")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// waitLog polls until the access log at path has n lines.
func waitLog(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func protoEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Trailer", "Grpc-Status")
	io.WriteString(w, r.Proto+" te="+r.Header.Get("Te")+" xfp="+r.Header.Get("X-Forwarded-Proto"))
	w.Header().Set("Grpc-Status", "0")
}

func TestH2cPriorKnowledgeDownstreamToH2cAndHTTP1Upstreams(t *testing.T) {
	p := newH2Proxy(t, []*cluster.Config{
		staticCluster(t, "h1", backend(t, "", protoEcho)),
		h2Cluster(t, "h2", nil, h2cBackend(t, protoEcho)),
	}, nil, nil, 0)
	c := h2cClient(t)
	resp, body := doGet(t, c, "http://"+p.addr+"/h2")
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || !strings.HasPrefix(body, "HTTP/2.0 te=trailers") {
		t.Fatalf("h2c to h2 upstream: %d %s %q", resp.StatusCode, resp.Proto, body)
	}
	if resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("trailer Grpc-Status = %q, want the upstream's trailer forwarded", resp.Trailer.Get("Grpc-Status"))
	}
	resp, body = doGet(t, c, "http://"+p.addr+"/h1")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "HTTP/1.1") || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("h2c to http/1.1 upstream: %d %q trailer %v", resp.StatusCode, body, resp.Trailer)
	}
	// An HTTP/1.1 client on the same HCM (codec AUTO), with a pool of its own: the
	// default transport's idle connections are other tests' (a port the kernel hands out
	// again), and the connection counts below are this test's.
	h1 := &http.Transport{}
	t.Cleanup(h1.CloseIdleConnections)
	resp, body = doGet(t, &http.Client{Transport: h1, Timeout: 10 * time.Second}, "http://"+p.addr+"/h2")
	if resp.StatusCode != 200 || resp.ProtoMajor != 1 || !strings.HasPrefix(body, "HTTP/2.0") {
		t.Fatalf("http/1.1 to h2 upstream: %d %s %q", resp.StatusCode, resp.Proto, body)
	}
	waitLog(t, p.logPath, 3)
	if lines := waitLog(t, p.logPath, 3); !strings.Contains(lines[0], `"GET /h2 HTTP/2" 200`) || !strings.Contains(lines[2], `"GET /h2 HTTP/1.1" 200`) {
		t.Errorf("access log protocols: %q", lines)
	}
	want := map[string]int64{
		"http.lab.downstream_cx_http2_total": 1, // both h2c requests on one connection
		"http.lab.downstream_cx_http1_total": 1,
		"http.lab.downstream_cx_total":       2,
		"http.lab.downstream_rq_2xx":         3,
		"cluster.h2.upstream_cx_http2_total": 1,
		"cluster.h2.upstream_cx_total":       1,
		"cluster.h2.upstream_rq_200":         2,
		"cluster.h1.upstream_cx_http1_total": 1,
		"cluster.h1.upstream_rq_total":       1,
	}
	for name, v := range want {
		if got := p.store.Value(name); got != v {
			t.Errorf("%s = %d, want %d", name, got, v)
		}
	}
}

func TestH2OverTLSNegotiatedByALPN(t *testing.T) {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	certs := ts.TLS.Certificates
	ts.Close()
	p := newH2Proxy(t, []*cluster.Config{h2Cluster(t, "h2", nil, h2cBackend(t, protoEcho))}, nil,
		&tls.Config{Certificates: certs, NextProtos: []string{"h2", "http/1.1"}}, 0)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	resp, body := doGet(t, &http.Client{Transport: tr}, "https://"+p.addr+"/")
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" || !strings.Contains(body, "xfp=https") {
		t.Fatalf("h2 over tls: %d %s %q", resp.StatusCode, resp.Proto, body)
	}
	// An HTTP/1.1 client over TLS still gets HTTP/1.1.
	tr1 := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	t.Cleanup(tr1.CloseIdleConnections)
	resp, _ = doGet(t, &http.Client{Transport: tr1}, "https://"+p.addr+"/")
	if resp.StatusCode != 200 || resp.ProtoMajor != 1 {
		t.Fatalf("http/1.1 over tls: %d %s", resp.StatusCode, resp.Proto)
	}
	if a, b := p.store.Value("http.lab.downstream_cx_http2_total"), p.store.Value("http.lab.downstream_cx_http1_total"); a != 1 || b != 1 {
		t.Errorf("downstream_cx_http2_total = %d, downstream_cx_http1_total = %d, want 1 and 1", a, b)
	}
}

// TestH2ConcurrentStreamsShareOneConnectionAndCountRequests pins Envoy's HTTP/2 pool:
// streams multiplex on one upstream connection, so max_connections 1 does not serialise
// them, and max_requests overflows (upstream_rq_pending_overflow) instead.
func TestH2ConcurrentStreamsShareOneConnectionAndCountRequests(t *testing.T) {
	const n = 8
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	up := h2cBackend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select { // every stream is in flight at once, or none answers
		case <-all:
		case <-time.After(5 * time.Second):
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		io.WriteString(w, "ok")
	})
	cb := &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxConnections: wrapperspb.UInt32(1), MaxRequests: wrapperspb.UInt32(n),
	}}}
	p := newH2Proxy(t, []*cluster.Config{h2Cluster(t, "h2", cb, up)}, nil, nil, 0)
	c := h2cClient(t)
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			resp, _ := doGet(t, c, "http://"+p.addr+"/")
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != 200 {
			t.Fatalf("stream %d: status %d", i, code)
		}
	}
	for _, name := range []string{"http.lab.downstream_cx_http2_total", "cluster.h2.upstream_cx_http2_total"} {
		if got := p.store.Value(name); got != 1 {
			t.Errorf("%s = %d, want 1 (streams multiplexed on one connection)", name, got)
		}
	}
	if got := p.store.Value("cluster.h2.upstream_rq_total"); got != n {
		t.Errorf("upstream_rq_total = %d, want %d", got, n)
	}
}

func TestH2MaxRequestsOverflows(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	up := h2cBackend(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	})
	cb := &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(1)}}}
	p := newH2Proxy(t, []*cluster.Config{h2Cluster(t, "h2", cb, up)}, nil, nil, 0)
	c := h2cClient(t)
	done := make(chan int, 1)
	go func() {
		resp, _ := doGet(t, c, "http://"+p.addr+"/")
		done <- resp.StatusCode
	}()
	<-started
	resp, _ := doGet(t, c, "http://"+p.addr+"/")
	close(release)
	if resp.StatusCode != 503 || resp.Header.Get("X-Envoy-Overloaded") != "true" {
		t.Errorf("second request over max_requests 1: %d, want 503 overflow", resp.StatusCode)
	}
	if code := <-done; code != 200 {
		t.Errorf("first request: %d", code)
	}
	if got := p.store.Value("cluster.h2.upstream_rq_pending_overflow"); got != 1 {
		t.Errorf("upstream_rq_pending_overflow = %d, want 1", got)
	}
}

// TestH2DrainSendsTwoGoAwaysAndFinishesInFlightStreams pins Envoy's drain sequence for
// HTTP/2: a GOAWAY with last stream id 2^31-1, after drain_timeout the GOAWAY with the
// real last stream id, and the stream in flight still completes.
func TestH2DrainSendsTwoGoAwaysAndFinishesInFlightStreams(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	up := h2cBackend(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	})
	draining := make(chan struct{})
	p := newH2Proxy(t, []*cluster.Config{h2Cluster(t, "h2", nil, up)}, draining, nil, 100*time.Millisecond)
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(conn, conn)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "backend"}, {":path", "/"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	<-started
	close(draining)
	var goaways []uint32
	var body []byte
	released := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break // the server closed the connection after the last stream
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo {
				t.Fatalf("GOAWAY with error %v", f.ErrCode)
			}
			goaways = append(goaways, f.LastStreamID)
			if len(goaways) == 2 && !released {
				released = true
				close(release)
			}
		case *http2.DataFrame:
			body = append(body, f.Data()...)
		}
	}
	if !released {
		close(release)
	}
	if len(goaways) != 2 || goaways[0] != 1<<31-1 || goaways[1] != 1 {
		t.Errorf("GOAWAY last stream ids = %v, want [2147483647 1]", goaways)
	}
	if string(body) != "finished" {
		t.Errorf("in-flight stream body = %q, want it completed after the GOAWAYs", body)
	}
	if got := p.store.Value("http.lab.downstream_cx_drain_close"); got != 1 {
		t.Errorf("downstream_cx_drain_close = %d, want 1", got)
	}
}

func TestCompileHCMCodecAndHTTP2Options(t *testing.T) {
	for _, tc := range []struct {
		name    string
		codec   hcmv3.HttpConnectionManager_CodecType
		want    Codec
		wantErr bool
	}{
		{"AUTO picks per connection", hcmv3.HttpConnectionManager_AUTO, CodecAuto, false},
		{"HTTP1", hcmv3.HttpConnectionManager_HTTP1, CodecHTTP1, false},
		{"HTTP2 with prior knowledge", hcmv3.HttpConnectionManager_HTTP2, CodecHTTP2, false},
		{"HTTP3 is refused", hcmv3.HttpConnectionManager_HTTP3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hcm := &hcmv3.HttpConnectionManager{
				StatPrefix: "lab", CodecType: tc.codec,
				RouteSpecifier:       &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "r"}},
				HttpFilters:          []*hcmv3.HttpFilter{{Name: RouterFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
				Http2ProtocolOptions: &corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(100)},
				DrainTimeout:         durationpb.New(2 * time.Second),
			}
			cfg, err := Compile(mustAny(t, hcm))
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "codec_type") {
					t.Fatalf("Compile error = %v, want codec_type refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Codec != tc.want || cfg.MaxConcurrentStreams != 100 || cfg.DrainTimeout != 2*time.Second {
				t.Errorf("Codec %v, MaxConcurrentStreams %d, DrainTimeout %v", cfg.Codec, cfg.MaxConcurrentStreams, cfg.DrainTimeout)
			}
		})
	}
}
