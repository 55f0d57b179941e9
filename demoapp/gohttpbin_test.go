package demoapp

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The go-httpbin persona answers as mccutchen/go-httpbin on the paths Istio's tasks use.
func TestGoHTTPBin(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newGoHTTPBin(rand.New(rand.NewPCG(1, 2))))
	defer srv.Close()
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := get("/status/418", nil)
	if resp.StatusCode != 418 || body != "I'm a teapot!" || resp.Header.Get("X-More-Info") != "http://tools.ietf.org/html/rfc2324" ||
		resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("/status/418 = %d %v %q; want go-httpbin's teapot", resp.StatusCode, resp.Header, body)
	}
	if resp, body := get("/status/200", nil); resp.StatusCode != 200 || body != "" {
		t.Errorf("/status/200 = %d %q", resp.StatusCode, body)
	}

	resp, body = get("/headers", map[string]string{"X-B3-Sampled": "1"})
	var h struct {
		Headers map[string][]string `json:"headers"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("/headers = %q (%s): %v", body, resp.Header.Get("Content-Type"), err)
	}
	if got := h.Headers["X-B3-Sampled"]; len(got) != 1 || got[0] != "1" || len(h.Headers["Host"]) != 1 {
		t.Errorf("/headers = %s; want every header's values as a list, Host among them", body)
	}
	if !strings.Contains(body, "\n  \"headers\": {\n    \"") {
		t.Errorf("/headers is not indented as go-httpbin's:\n%s", body)
	}

	_, body = get("/ip", map[string]string{"X-Forwarded-For": "10.0.0.7, 10.0.0.8"})
	if strings.TrimSpace(body) != "{\n  \"origin\": \"10.0.0.7\"\n}" {
		t.Errorf("/ip = %q; want the first X-Forwarded-For address", body)
	}

	resp, body = get("/delay/0.01?x=1", nil)
	var d struct {
		Args   map[string][]string `json:"args"`
		Method string              `json:"method"`
		URL    string              `json:"url"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil || resp.StatusCode != 200 || d.Method != "GET" || d.Args["x"][0] != "1" ||
		!strings.HasPrefix(resp.Header.Get("Server-Timing"), "initial_delay;dur=10.00") {
		t.Errorf("/delay/0.01 = %d %v %s (%v)", resp.StatusCode, resp.Header, body, err)
	}
	resp, body = get("/delay/11", nil)
	if resp.StatusCode != 400 || !strings.Contains(body, `"detail": "invalid duration: duration 11s longer than 10s"`) {
		t.Errorf("/delay/11 = %d %s; want go-httpbin's 400", resp.StatusCode, body)
	}
}
