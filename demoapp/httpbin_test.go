package demoapp

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// httpbinServer serves the httpbin persona on a loopback test server.
func httpbinServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(newHTTPBin(rand.New(rand.NewPCG(1, 2))))
	t.Cleanup(srv.Close)
	return srv
}

// get sends a request and returns the status, headers and body.
func fetchBin(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", req.URL, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func newRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestHTTPBinStatusAsHTTPBin(t *testing.T) {
	t.Parallel()
	srv := httpbinServer(t)
	for _, tt := range []struct {
		path   string
		status int
		body   string // substring; "" for an empty body
		header string // a header that must be set
	}{
		{path: "/status/418", status: 418, body: "-=[ teapot ]=-", header: "X-More-Info"},
		{path: "/status/200", status: 200},
		{path: "/status/503", status: 503},
		{path: "/status/401", status: 401, header: "Www-Authenticate"},
		{path: "/status/302", status: 302, header: "Location"},
		{path: "/status/abc", status: 400, body: `invalid status code "abc"`},
		{path: "/status/200:x,500", status: 400, body: `invalid weight "x" of status code 200`},
		{path: "/status/99", status: 400, body: `invalid status code "99"`},
	} {
		req := newRequest(t, http.MethodGet, srv.URL+tt.path, "")
		req.Header.Set("Accept", "*/*")
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("GET %s: status %d, want %d", tt.path, resp.StatusCode, tt.status)
		}
		if tt.body == "" && len(body) != 0 && tt.status < 400 {
			t.Errorf("GET %s: body %q, want none", tt.path, body)
		}
		if tt.body != "" && !strings.Contains(string(body), tt.body) {
			t.Errorf("GET %s: body %q does not contain %q", tt.path, body, tt.body)
		}
		if tt.header != "" && resp.Header.Get(tt.header) == "" {
			t.Errorf("GET %s: no %s header", tt.path, tt.header)
		}
	}
}

func TestHTTPBinStatusDrawsAmongWeightedCodes(t *testing.T) {
	t.Parallel()
	b := &httpbin{rnd: rand.New(rand.NewPCG(7, 7))}
	seen := map[int]int{}
	for range 400 {
		code, err := b.pickStatus("200:3,500:1,418:0")
		if err != nil {
			t.Fatal(err)
		}
		seen[code]++
	}
	if seen[418] != 0 {
		t.Errorf("a code of weight 0 was drawn %d times", seen[418])
	}
	if seen[200] < 250 || seen[200] > 350 || seen[500] < 50 || seen[500] > 150 {
		t.Errorf("200:3,500:1 drew %v over 400 draws; want about 300/100", seen)
	}
	if _, err := b.pickStatus("200:0,500:0"); err == nil {
		t.Error("codes with no positive weight were accepted")
	}
}

func TestHTTPBinEchoesTheRequest(t *testing.T) {
	t.Parallel()
	srv := httpbinServer(t)

	req := newRequest(t, http.MethodGet, srv.URL+"/headers", "")
	req.Header.Set("x-b3-sampled", "1")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Host = "httpbin:8000"
	status, hdr, body := fetchBin(t, req)
	var headers struct{ Headers map[string]string }
	if err := json.Unmarshal([]byte(body), &headers); err != nil || status != 200 {
		t.Fatalf("GET /headers: %d %q (%v)", status, body, err)
	}
	if hdr.Get("Content-Type") != "application/json" {
		t.Errorf("GET /headers: content type %q", hdr.Get("Content-Type"))
	}
	for name, want := range map[string]string{"Host": "httpbin:8000", "X-B3-Sampled": "1", "X-Multi": "a,b"} {
		if got := headers.Headers[name]; got != want {
			t.Errorf("GET /headers: %s = %q, want %q (all: %v)", name, got, want, headers.Headers)
		}
	}

	req = newRequest(t, http.MethodGet, srv.URL+"/ip", "")
	req.Header.Set("X-Forwarded-For", "10.1.2.3,10.244.0.9")
	_, _, body = fetchBin(t, req)
	if !strings.Contains(body, `"origin": "10.1.2.3, 10.244.0.9"`) {
		t.Errorf("GET /ip with X-Forwarded-For: %s", body)
	}
	_, _, body = fetchBin(t, newRequest(t, http.MethodGet, srv.URL+"/ip", ""))
	if !strings.Contains(body, `"origin": "127.0.0.1"`) {
		t.Errorf("GET /ip: %s", body)
	}

	_, _, body = fetchBin(t, newRequest(t, http.MethodGet, srv.URL+"/get?show_env=1&a=1&a=2", ""))
	var got struct {
		Args map[string]any
		URL  string
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("GET /get: %q: %v", body, err)
	}
	if got.Args["show_env"] != "1" || len(got.Args["a"].([]any)) != 2 || !strings.HasSuffix(got.URL, "/get?show_env=1&a=1&a=2") {
		t.Errorf("GET /get: %+v", got)
	}

	status, _, body = fetchBin(t, newRequest(t, http.MethodPost, srv.URL+"/anything/x", `{"k": [1, 2]}`))
	var echoed struct {
		Method string
		Data   string
		JSON   map[string][]int
	}
	if err := json.Unmarshal([]byte(body), &echoed); err != nil || status != 200 {
		t.Fatalf("POST /anything/x: %d %q (%v)", status, body, err)
	}
	if echoed.Method != "POST" || echoed.Data != `{"k": [1, 2]}` || len(echoed.JSON["k"]) != 2 {
		t.Errorf("POST /anything/x: %+v", echoed)
	}

	_, hdr, _ = fetchBin(t, newRequest(t, http.MethodGet, srv.URL+"/response-headers?X-Test=yes", ""))
	if hdr.Get("X-Test") != "yes" {
		t.Errorf("GET /response-headers?X-Test=yes: header %q", hdr.Get("X-Test"))
	}
	_, _, body = fetchBin(t, newRequest(t, http.MethodGet, srv.URL+"/uuid", ""))
	var u struct{ UUID string }
	if json.Unmarshal([]byte(body), &u) != nil || len(u.UUID) != 36 || u.UUID[14] != '4' {
		t.Errorf("GET /uuid: %s", body)
	}
}

func TestHTTPBinDelay(t *testing.T) {
	t.Parallel()
	srv := httpbinServer(t)
	start := time.Now()
	status, _, body := fetchBin(t, newRequest(t, http.MethodGet, srv.URL+"/delay/0.2", ""))
	if took := time.Since(start); status != 200 || took < 200*time.Millisecond {
		t.Errorf("GET /delay/0.2: status %d after %v, want 200 after >= 200ms", status, took)
	}
	if !strings.Contains(body, `"url"`) {
		t.Errorf("GET /delay/0.2 answered %q, want /get's echo", body)
	}
	if status, _, _ := fetchBin(t, newRequest(t, http.MethodGet, srv.URL+"/delay/-1", "")); status != 400 {
		t.Errorf("GET /delay/-1: status %d, want 400", status)
	}
}

// The explicit-deny task POSTs to /post: the method endpoints echo their body, and answer
// another method with 405, as httpbin does.
func TestHTTPBinMethodEndpoints(t *testing.T) {
	t.Parallel()
	srv := httpbinServer(t)
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		path := "/" + strings.ToLower(m)
		code, _, body := fetchBin(t, newRequest(t, m, srv.URL+path, `{"a":1}`))
		if code != http.StatusOK || !strings.Contains(body, `"data": "{\"a\":1}"`) || !strings.Contains(body, `"url": "http://`) {
			t.Errorf("%s %s: %d\n%s\nwant 200 echoing the body", m, path, code, body)
		}
		if code, _, body := fetchBin(t, newRequest(t, "GET", srv.URL+path, "")); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d %s, want 405", path, code, body)
		}
	}
}
