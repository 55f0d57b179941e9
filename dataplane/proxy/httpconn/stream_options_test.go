package httpconn

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	uuidv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// echoHeaders is a backend answering with the request's path and headers as JSON.
func echoHeaders(t *testing.T) string {
	t.Helper()
	return backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]string{":path": r.RequestURI}
		for k := range r.Header {
			out[strings.ToLower(k)] = strings.Join(r.Header.Values(k), ",")
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}

func seen(t *testing.T, body string) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return m
}

func echoLab(t *testing.T, mutate func(*hcmv3.HttpConnectionManager)) *lab {
	t.Helper()
	up := echoHeaders(t)
	return newLabHCM(t, mutate, []*cluster.Config{staticCluster(t, "echo", up)}, routeTo(prefix("/"), to("echo")))
}

func TestUseRemoteAddressAppendsTheClientToXForwardedForAndMarksItExternal(t *testing.T) {
	for _, tc := range []struct {
		name         string
		useRemote    bool
		wantXFF      string
		wantExternal string
	}{
		// The proxy's client is 127.0.0.1: Envoy appends its own local address (the
		// namespace's first non-loopback IPv4) for a loopback peer.
		{name: "use_remote_address true", useRemote: true, wantXFF: "10.9.9.9," + localAddress().String(), wantExternal: "127.0.0.1"},
		{name: "use_remote_address false", useRemote: false, wantXFF: "10.9.9.9", wantExternal: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := echoLab(t, func(h *hcmv3.HttpConnectionManager) { h.UseRemoteAddress = wrapperspb.Bool(tc.useRemote) })
			_, body := l.get(t, "/", "X-Forwarded-For", "10.9.9.9", "X-Envoy-Internal", "true", "X-Envoy-Retry-On", "5xx")
			got := seen(t, body)
			if got["x-forwarded-for"] != tc.wantXFF {
				t.Errorf("x-forwarded-for = %q, want %q", got["x-forwarded-for"], tc.wantXFF)
			}
			if got["x-envoy-external-address"] != tc.wantExternal {
				t.Errorf("x-envoy-external-address = %q, want %q", got["x-envoy-external-address"], tc.wantExternal)
			}
			if _, ok := got["x-envoy-internal"]; ok {
				t.Error("x-envoy-internal reached the upstream of a request from a non-internal address")
			}
			if _, ok := got["x-envoy-retry-on"]; ok == tc.useRemote {
				t.Errorf("x-envoy-retry-on forwarded = %v, want %v (removed from edge requests only)", ok, !tc.useRemote)
			}
		})
	}
}

func TestEdgeRequestGetsANewRequestIDUnlessPreserved(t *testing.T) {
	const external = "5f7c1e2a-0b5e-4c8e-9d4e-1a2b3c4d5e6f"
	for _, tc := range []struct {
		name       string
		useRemote  bool
		preserve   bool
		noGenerate bool
		keep       bool
	}{
		{name: "sidecar keeps the id", useRemote: false, keep: true},
		{name: "edge replaces the id", useRemote: true, keep: false},
		{name: "edge with preserve_external_request_id keeps it", useRemote: true, preserve: true, keep: true},
		{name: "edge without generate_request_id keeps it", useRemote: true, noGenerate: true, keep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
				h.UseRemoteAddress = wrapperspb.Bool(tc.useRemote)
				h.PreserveExternalRequestId = tc.preserve
				if tc.noGenerate {
					h.GenerateRequestId = wrapperspb.Bool(false)
				}
				h.RequestIdExtension = &hcmv3.RequestIDExtension{TypedConfig: mustAny(t, &uuidv3.UuidRequestIdConfig{})}
			})
			_, body := l.get(t, "/", "X-Request-Id", external)
			got := seen(t, body)["x-request-id"]
			if (got == external) != tc.keep {
				t.Errorf("x-request-id = %q, kept = %v, want kept %v", got, got == external, tc.keep)
			}
			if len(got) != 36 {
				t.Errorf("x-request-id %q is not a UUID", got)
			}
		})
	}
}

func TestTracingWithoutProviderPacksTheTraceReasonIntoTheRequestID(t *testing.T) {
	for _, tc := range []struct {
		name   string
		random float64
		hdr    []string
		want   byte
	}{
		{name: "random sampling 100 percent samples", random: 100, want: traceSampled},
		{name: "random sampling 0 percent does not trace", random: 0, want: traceNone},
		{name: "x-client-trace-id forces a client trace", random: 0, hdr: []string{"X-Client-Trace-Id", "abc"}, want: traceClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
				h.Tracing = &hcmv3.HttpConnectionManager_Tracing{RandomSampling: &typev3.Percent{Value: tc.random}}
			})
			for i := 0; i < 20; i++ {
				_, body := l.get(t, "/", tc.hdr...)
				rid := seen(t, body)["x-request-id"]
				if len(rid) != 36 || rid[14] != tc.want {
					t.Fatalf("x-request-id = %q, want trace reason %q at index 14", rid, tc.want)
				}
			}
		})
	}
	t.Run("no tracing leaves a version 4 id", func(t *testing.T) {
		l := echoLab(t, nil)
		_, body := l.get(t, "/")
		if rid := seen(t, body)["x-request-id"]; rid[14] != '4' {
			t.Errorf("x-request-id = %q", rid)
		}
	})
}

func TestTracingProvidersOtherThanZipkinAreRefusedByName(t *testing.T) {
	h := &hcmv3.HttpConnectionManager{Tracing: &hcmv3.HttpConnectionManager_Tracing{Provider: nil, Verbose: true}}
	if _, err := compileTracing(h); err != nil {
		t.Fatalf("verbose tracing without a provider: %v", err)
	}
	_, err := compileTracingProvider(t)
	if err == nil || !strings.Contains(err.Error(), "tracing.provider") || !strings.Contains(err.Error(), "envoy.tracers.opentelemetry") {
		t.Fatalf("err = %v, want tracing.provider envoy.tracers.opentelemetry refused", err)
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stall":
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		case "/stall-mid-body":
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "12345")
			w.(http.Flusher).Flush()
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		case "/trickle":
			for i := 0; i < 8; i++ {
				_, _ = io.WriteString(w, "x")
				w.(http.Flusher).Flush()
				time.Sleep(60 * time.Millisecond)
			}
		}
	})
	noTimeout := to("up")
	noTimeout.Timeout = durationpb.New(0)
	l := newLabHCM(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(200 * time.Millisecond) },
		[]*cluster.Config{staticCluster(t, "up", up)}, routeTo(prefix("/"), noTimeout))

	start := time.Now()
	resp, body := l.get(t, "/stall")
	if resp.StatusCode != http.StatusRequestTimeout || body != "stream timeout" {
		t.Errorf("stalled before headers: %d %q, want 408 \"stream timeout\"", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v, want about 200ms", d)
	}
	if got := l.store.Value("http.lab.downstream_rq_idle_timeout"); got != 1 {
		t.Errorf("downstream_rq_idle_timeout = %d, want 1", got)
	}
	if lines := l.waitLines(t, 1); !strings.Contains(lines[0], " 408 SI ") {
		t.Errorf("access log %q lacks 408 SI", lines[0])
	}

	req, _ := http.NewRequest("GET", "http://"+l.addr+"/stall-mid-body", nil)
	r2, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r2.Body)
	r2.Body.Close()
	if err == nil || string(b) != "12345" {
		t.Errorf("stalled mid-body: read %q, %v; want the first bytes and a reset", b, err)
	}

	if resp, body := l.get(t, "/trickle"); resp.StatusCode != 200 || body != "xxxxxxxx" {
		t.Errorf("a trickling response (a byte every 60ms) under a 200ms idle timeout: %d %q", resp.StatusCode, body)
	}
}

func TestStreamIdleTimeoutDefaultsToEnvoys(t *testing.T) {
	for _, tc := range []struct {
		set  *durationpb.Duration
		want time.Duration
	}{{nil, 5 * time.Minute}, {durationpb.New(0), 0}, {durationpb.New(time.Minute), time.Minute}} {
		cfg := &Config{}
		if err := cfg.compileStreamOptions(&hcmv3.HttpConnectionManager{StreamIdleTimeout: tc.set}); err != nil {
			t.Fatal(err)
		}
		if cfg.StreamIdleTimeout != tc.want {
			t.Errorf("stream_idle_timeout %v: %v, want %v", tc.set, cfg.StreamIdleTimeout, tc.want)
		}
	}
}

func TestNormalizePathAndEscapedSlashes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*hcmv3.HttpConnectionManager)
		path     string
		wantCode int
		wantPath string
	}{
		{name: "normalize_path removes dot segments", mutate: func(h *hcmv3.HttpConnectionManager) { h.NormalizePath = wrapperspb.Bool(true) },
			path: "/a/./b/../c?x=1", wantCode: 200, wantPath: "/a/c?x=1"},
		{name: "normalize_path decodes unreserved escapes", mutate: func(h *hcmv3.HttpConnectionManager) { h.NormalizePath = wrapperspb.Bool(true) },
			path: "/%61b%2fc", wantCode: 200, wantPath: "/ab%2Fc"},
		{name: "without normalize_path the path is forwarded as sent", mutate: nil, path: "/a/./b/../c", wantCode: 200, wantPath: "/a/./b/../c"},
		{name: "merge_slashes", mutate: func(h *hcmv3.HttpConnectionManager) { h.MergeSlashes = true }, path: "//a///b", wantCode: 200, wantPath: "/a/b"},
		{name: "UNESCAPE_AND_FORWARD", mutate: func(h *hcmv3.HttpConnectionManager) {
			h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD
		}, path: "/a%2Fb%5cc", wantCode: 200, wantPath: `/a/b\c`},
		{name: "REJECT_REQUEST", mutate: func(h *hcmv3.HttpConnectionManager) {
			h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_REJECT_REQUEST
		}, path: "/a%2Fb", wantCode: 400},
		{name: "KEEP_UNCHANGED", mutate: func(h *hcmv3.HttpConnectionManager) {
			h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_KEEP_UNCHANGED
		}, path: "/a%2Fb", wantCode: 200, wantPath: "/a%2Fb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := echoLab(t, tc.mutate)
			resp, body := rawGet(t, l.addr, tc.path)
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tc.wantCode, body)
			}
			if tc.wantCode == 200 {
				if got := seen(t, body)[":path"]; got != tc.wantPath {
					t.Errorf("upstream :path = %q, want %q", got, tc.wantPath)
				}
			}
		})
	}
	t.Run("UNESCAPE_AND_REDIRECT", func(t *testing.T) {
		l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
			h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT
		})
		resp, _ := rawGet(t, l.addr, "/a%2Fb?q=1")
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/a/b?q=1" {
			t.Errorf("status %d location %q, want 307 to /a/b?q=1", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
}

// rawGet sends a request target verbatim (net/http would clean it).
func rawGet(t *testing.T, addr, target string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestIgnorePortInHostMatching(t *testing.T) {
	rc := func(ignore bool) *RouteTable {
		tb, err := CompileRoutes(&routev3.RouteConfiguration{Name: "r", IgnorePortInHostMatching: ignore,
			VirtualHosts: []*routev3.VirtualHost{{Name: "reviews", Domains: []string{"reviews.default.svc.cluster.local"},
				Routes: []*routev3.Route{routeTo(prefix("/"), to("c"))}}}})
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	if vh := rc(true).VirtualHostFor("reviews.default.svc.cluster.local:9080"); vh == nil || vh.Name != "reviews" {
		t.Errorf("ignore_port_in_host_matching: authority with a port matched %v", vh)
	}
	if vh := rc(false).VirtualHostFor("reviews.default.svc.cluster.local:9080"); vh != nil {
		t.Errorf("without ignore_port_in_host_matching the port is part of the authority, matched %v", vh.Name)
	}
	if got := stripPort("[::1]:80"); got != "[::1]" {
		t.Errorf("stripPort([::1]:80) = %q", got)
	}
	if got := stripPort("[::1]"); got != "[::1]" {
		t.Errorf("stripPort([::1]) = %q", got)
	}
}

func TestMaxDirectResponseBodySizeBytes(t *testing.T) {
	direct := func(body string, max *wrapperspb.UInt32Value) error {
		_, err := CompileRoutes(&routev3.RouteConfiguration{Name: "r", MaxDirectResponseBodySizeBytes: max,
			VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match: prefix("/"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200,
					Body: inline(body)}}}}}}})
		return err
	}
	big := strings.Repeat("x", 5000)
	if err := direct(big, nil); err == nil || !strings.Contains(err.Error(), "maximum is 4096") {
		t.Errorf("5000-byte body under Envoy's 4 KiB default: err = %v", err)
	}
	if err := direct(big, wrapperspb.UInt32(1024*1024)); err != nil {
		t.Errorf("5000-byte body under Istio's 1 MiB: %v", err)
	}
}

func TestGRPCTimeoutHeaderUnderMaxGrpcTimeout(t *testing.T) {
	ms := func(d time.Duration) *time.Duration { return &d }
	grpc := func(timeout string) *http.Request {
		r, _ := http.NewRequest("POST", "/pkg.Svc/M", nil)
		r.Header.Set("Content-Type", "application/grpc")
		if timeout != "" {
			r.Header.Set("Grpc-Timeout", timeout)
		}
		return r
	}
	plain, _ := http.NewRequest("GET", "/", nil)
	for _, tc := range []struct {
		name string
		max  *time.Duration
		req  *http.Request
		want time.Duration
	}{
		{name: "unset keeps the route timeout", max: nil, req: grpc("1S"), want: 15 * time.Second},
		{name: "0 means no cap: the header decides", max: ms(0), req: grpc("200m"), want: 200 * time.Millisecond},
		{name: "0 and no header: no timeout", max: ms(0), req: grpc(""), want: 0},
		{name: "the cap bounds the header", max: ms(time.Second), req: grpc("5S"), want: time.Second},
		{name: "the cap applies without a header", max: ms(time.Second), req: grpc(""), want: time.Second},
		{name: "not gRPC keeps the route timeout", max: ms(0), req: plain, want: 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Route{Timeout: 15 * time.Second, GRPCTimeoutMax: tc.max}
			if got := r.timeoutFor(tc.req); got != tc.want {
				t.Errorf("timeout = %v, want %v", got, tc.want)
			}
		})
	}
}

func inline(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func compileTracingProvider(t *testing.T) (*Tracing, error) {
	t.Helper()
	return compileTracing(&hcmv3.HttpConnectionManager{Tracing: &hcmv3.HttpConnectionManager_Tracing{
		Provider: &tracev3.Tracing_Http{Name: "envoy.tracers.opentelemetry"}}})
}

func TestGenerateRequestIDFalseLeavesRequestsWithoutAnID(t *testing.T) {
	l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
		h.GenerateRequestId = wrapperspb.Bool(false)
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true}
	})
	_, body := l.get(t, "/")
	if rid, ok := seen(t, body)["x-request-id"]; ok {
		t.Errorf("x-request-id %q generated with generate_request_id false", rid)
	}
}

func TestHCMIdleTimeoutClosesAKeptAliveConnection(t *testing.T) {
	l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(150 * time.Millisecond)}
	})
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ { // requests within the timeout keep it open
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v idle, want about 150ms", d)
	}
	if got := l.store.Value("http.lab.downstream_cx_idle_timeout"); got != 1 {
		t.Errorf("downstream_cx_idle_timeout = %d, want 1", got)
	}
}

func TestHeadersWithUnderscoresAction(t *testing.T) {
	for _, tc := range []struct {
		name     string
		action   corev3.HttpProtocolOptions_HeadersWithUnderscoresAction
		wantCode int
		wantSeen bool
		stat     string
	}{
		{name: "ALLOW forwards", action: corev3.HttpProtocolOptions_ALLOW, wantCode: 200, wantSeen: true},
		{name: "REJECT_REQUEST answers 400", action: corev3.HttpProtocolOptions_REJECT_REQUEST, wantCode: 400, stat: "http.lab.requests_rejected_with_underscores_in_headers"},
		{name: "DROP_HEADER drops it", action: corev3.HttpProtocolOptions_DROP_HEADER, wantCode: 200, stat: "http.lab.dropped_headers_with_underscores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
				h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{HeadersWithUnderscoresAction: tc.action}
			})
			resp, body := l.get(t, "/", "x_custom", "1", "x-fine", "2")
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantCode)
			}
			if tc.wantCode == 200 {
				got := seen(t, body)
				if _, ok := got["x_custom"]; ok != tc.wantSeen {
					t.Errorf("x_custom forwarded = %v, want %v", ok, tc.wantSeen)
				}
				if got["x-fine"] != "2" {
					t.Errorf("x-fine = %q", got["x-fine"])
				}
			}
			if tc.stat != "" && l.store.Value(tc.stat) != 1 {
				t.Errorf("%s = %d, want 1", tc.stat, l.store.Value(tc.stat))
			}
		})
	}
}

// istiod's waypoint tracing block tags spans with substitution formats: without a
// provider there is no span to tag, so it is taken; with one it is refused by name.
func TestTracingValueTagNeedsNoSpanWithoutProvider(t *testing.T) {
	valueTag := &tracingv3.CustomTag{Tag: "istio.destination_app", Type: &tracingv3.CustomTag_Value{Value: "%FILTER_STATE(upstream_peer_obj:FIELD:app)%"}}
	h := &hcmv3.HttpConnectionManager{Tracing: &hcmv3.HttpConnectionManager_Tracing{CustomTags: []*tracingv3.CustomTag{valueTag}}}
	if tr, err := compileTracing(h); err != nil || len(tr.Tags) != 0 {
		t.Errorf("without a provider: %v, %d tags; want taken, no tag", err, len(tr.Tags))
	}
	h.Tracing.Provider = &tracev3.Tracing_Http{Name: "envoy.tracers.zipkin"}
	if _, err := compileTracing(h); err == nil || !strings.Contains(err.Error(), "tracing.custom_tags[0].value: a substitution format tag is not supported") {
		t.Errorf("with a provider: %v; want the value tag refused by name", err)
	}
}
