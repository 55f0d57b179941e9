package demoapp

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// startApp serves a demo app with c on a loopback httptest server.
func startApp(t *testing.T, c Config) *httptest.Server {
	t.Helper()
	h := newHandler(c, testutil.Logger(t))
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.client.CloseIdleConnections()
	})
	return srv
}

// get sends a GET with headers and decodes the JSON answer.
func get(t *testing.T, url string, headers map[string]string) (int, response) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var body response
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decode answer: %v", err)
	}
	return resp.StatusCode, body
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	srv := startApp(t, Config{Service: "backend", Pod: "backend-v1", Namespace: "default", Version: "v1", Ports: []uint16{1}})
	status, body := get(t, srv.URL+"/some/path?q=1", map[string]string{"X-Custom": "yes"})
	if status != http.StatusOK {
		t.Errorf("status = %d, want 200", status)
	}
	if body.Service != "backend" || body.Pod != "backend-v1" || body.Namespace != "default" || body.Version != "v1" ||
		body.IP != "127.0.0.1" || body.Method != "GET" || body.Path != "/some/path" {
		t.Errorf("answer = %+v, want the identity, ip 127.0.0.1 and GET /some/path", body)
	}
	if body.Headers["x-custom"] != "yes" || !strings.HasPrefix(body.Headers["host"], "127.0.0.1:") {
		t.Errorf("headers = %v, want x-custom and host", body.Headers)
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	srv := startApp(t, Config{Ports: []uint16{1}, ErrorRate: 1, Latency: time.Hour})
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok (faults do not apply)", resp.StatusCode, b)
	}
}

func TestStatusQuery(t *testing.T) {
	t.Parallel()
	srv := startApp(t, Config{Service: "backend", Ports: []uint16{1}})
	if status, body := get(t, srv.URL+"/?status=503", nil); status != 503 || body.Service != "backend" {
		t.Errorf("?status=503 answered %d %+v, want 503 with the identity", status, body)
	}
	if status, body := get(t, srv.URL+"/?status=abc", nil); status != 400 || !strings.Contains(body.Error, `"abc"`) {
		t.Errorf("?status=abc answered %d %+v, want 400 naming the value", status, body)
	}
}

func TestUpstreams(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen http.Header
	jsonUp := startApp(t, Config{Service: "backend", Ports: []uint16{1}})
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(recorder.Close)
	closed := freePort(t) // nothing listens there: connection refused
	front := startApp(t, Config{Service: "frontend", Ports: []uint16{1}, Upstreams: []string{
		jsonUp.URL + "/", recorder.URL + "/x", "http://" + closed + "/",
	}})

	status, body := get(t, front.URL+"/", map[string]string{
		"x-request-id": "req-1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"x-b3-traceid": "abc", "b3": "abc-def-1", "authorization": "secret",
	})
	if status != http.StatusOK || len(body.Upstreams) != 3 {
		t.Fatalf("answer %d with %d upstreams, want 200 with 3: %+v", status, len(body.Upstreams), body)
	}
	var nested response
	if err := json.Unmarshal(body.Upstreams[0].Body, &nested); err != nil || body.Upstreams[0].Status != 200 ||
		nested.Service != "backend" || nested.Headers["x-request-id"] != "req-1" {
		t.Errorf("upstream 0 = %+v (%v), want backend's JSON answer with the propagated x-request-id", body.Upstreams[0], err)
	}
	if u := body.Upstreams[1]; u.Status != 500 || string(u.Body) != `"boom\n"` || u.Error != "" {
		t.Errorf("upstream 1 = %+v, want status 500 and its text as a string", u)
	}
	if u := body.Upstreams[2]; u.Status != 0 || !strings.Contains(u.Error, "refused") {
		t.Errorf("upstream 2 = %+v, want a connection refused error", u)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"X-Request-Id", "Traceparent", "X-B3-Traceid", "B3"} {
		if seen.Get(k) == "" {
			t.Errorf("header %s was not propagated: %v", k, seen)
		}
	}
	if seen.Get("Authorization") != "" {
		t.Errorf("authorization was propagated: %v", seen)
	}

	// Only "/" calls upstreams.
	if _, body := get(t, front.URL+"/other", nil); len(body.Upstreams) != 0 {
		t.Errorf("/other called upstreams: %+v", body.Upstreams)
	}
}

func TestErrorInjectionIsSeeded(t *testing.T) {
	t.Parallel()
	statuses := func(c Config) string {
		srv := startApp(t, c)
		var b strings.Builder
		for range 40 {
			status, _ := get(t, srv.URL+"/", nil)
			b.WriteString(map[bool]string{true: "E", false: "."}[status != 200])
		}
		return b.String()
	}
	c := Config{Ports: []uint16{1}, ErrorRate: 0.5, ErrorCode: 503, Seed: 7}
	first, second := statuses(c), statuses(c)
	if first != second {
		t.Errorf("same seed, different faults:\n%s\n%s", first, second)
	}
	if n := strings.Count(first, "E"); n < 8 || n > 32 {
		t.Errorf("%d of 40 requests failed at rate 0.5: %s", n, first)
	}
	srv := startApp(t, Config{Ports: []uint16{1}, ErrorRate: 1})
	if status, body := get(t, srv.URL+"/", nil); status != DefaultErrorCode || body.Error != "fault injected" {
		t.Errorf("rate 1 answered %d %+v, want %d fault injected", status, body, DefaultErrorCode)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	srv := startApp(t, Config{Ports: []uint16{1}, Latency: 100 * time.Millisecond})
	start := time.Now()
	get(t, srv.URL+"/", nil)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("answered after %v, want at least the 100ms latency", d)
	}
}

// freePort returns a loopback address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
