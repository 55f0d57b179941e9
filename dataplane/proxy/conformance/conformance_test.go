package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/statstext"
)

// client does not follow redirects: the redirect case reads the 301 itself.
var client = &http.Client{
	Timeout:       5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type answer struct {
	code    int
	header  http.Header
	body    string
	server  string              // which upstream served it ("" when none did)
	seen    map[string][]string // request headers the upstream received
	elapsed time.Duration
}

func get(t *testing.T, url string, h map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header, body: string(body), elapsed: time.Since(start)}
	var echo struct {
		Server  string              `json:"server"`
		Headers map[string][]string `json:"headers"`
	}
	if json.Unmarshal(body, &echo) == nil {
		a.server, a.seen = echo.Server, http.Header(echo.Headers)
	}
	return a
}

// stats reads the admin's /stats text: its counters and gauges by name.
func stats(t *testing.T, admin string) map[string]uint64 {
	t.Helper()
	resp, err := client.Get("http://" + admin + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, err := statstext.ParseValues(resp.Body)
	if err != nil {
		t.Fatalf("read %s/stats: %v", admin, err)
	}
	return m
}

// TestHTTPBehaviours runs every request case against one proxy process per target.
func TestHTTPBehaviours(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			argv := tg.argv(t)
			u := startUpstreams(t)
			dir := t.TempDir()
			port := freePort(t)
			logPath := filepath.Join(dir, "access.log")
			p := start(t, argv, dir, bootstrap(t, u, port, logPath))
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			// The listener may bind a moment after the admin: wait for the first answer.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if resp, err := client.Get(base + "/direct"); err == nil {
					resp.Body.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("listener not serving after 10s")
				}
				time.Sleep(20 * time.Millisecond)
			}

			t.Run("route by prefix", func(t *testing.T) {
				if a := get(t, base+"/b/x", nil); a.code != 200 || a.server != "b" {
					t.Errorf("/b/x: %d served by %q, want 200 from b", a.code, a.server)
				}
				if a := get(t, base+"/other", nil); a.code != 200 || a.server != "a" {
					t.Errorf("/other: %d served by %q, want 200 from a", a.code, a.server)
				}
			})
			t.Run("route by header", func(t *testing.T) {
				if a := get(t, base+"/h", map[string]string{"x-pick": "b"}); a.server != "b" {
					t.Errorf("/h with x-pick: b served by %q, want b", a.server)
				}
				if a := get(t, base+"/h", map[string]string{"x-pick": "c"}); a.server != "a" {
					t.Errorf("/h with x-pick: c served by %q, want a (falls through)", a.server)
				}
			})
			t.Run("weighted clusters", func(t *testing.T) {
				seen := map[string]int{}
				for range 40 {
					seen[get(t, base+"/weighted", nil).server]++
				}
				if seen["a"] == 0 || seen["b"] == 0 || seen["a"]+seen["b"] != 40 {
					t.Errorf("40 requests split 1:1 went %v, want both a and b", seen)
				}
			})
			t.Run("retry on 5xx", func(t *testing.T) {
				before, had := stats(t, p.admin)["cluster.flaky.upstream_rq_retry"]
				a := get(t, base+"/flaky", nil)
				if a.code != 200 {
					t.Errorf("/flaky: %d, want 200 after one retry", a.code)
				}
				after := stats(t, p.admin)["cluster.flaky.upstream_rq_retry"]
				if !had || before != 0 || after != 1 {
					t.Errorf("cluster.flaky.upstream_rq_retry went %d (present %v) -> %d, want 0 -> 1", before, had, after)
				}
			})
			t.Run("fault abort", func(t *testing.T) {
				if a := get(t, base+"/abort", nil); a.code != 503 || a.server != "" || a.body != "fault filter abort" {
					t.Errorf("/abort: %d %q served by %q, want 503 \"fault filter abort\" from the proxy", a.code, a.body, a.server)
				}
			})
			t.Run("fault delay", func(t *testing.T) {
				if a := get(t, base+"/delay", nil); a.code != 200 || a.elapsed < 300*time.Millisecond {
					t.Errorf("/delay: %d after %v, want 200 after >= 300ms", a.code, a.elapsed)
				}
			})
			t.Run("direct response", func(t *testing.T) {
				if a := get(t, base+"/direct", nil); a.code != 418 || a.body != "direct" {
					t.Errorf("/direct: %d %q, want 418 \"direct\"", a.code, a.body)
				}
			})
			t.Run("redirect", func(t *testing.T) {
				a := get(t, base+"/redirect", nil)
				if loc := a.header.Get("Location"); a.code != 301 || loc != "http://example.com/moved" {
					t.Errorf("/redirect: %d Location %q, want 301 http://example.com/moved", a.code, loc)
				}
			})
			t.Run("header add and remove", func(t *testing.T) {
				a := get(t, base+"/hdr", map[string]string{"x-drop-me": "1"})
				if got := http.Header(a.seen).Get("X-Added-Req"); got != "yes" {
					t.Errorf("upstream saw x-added-req %q, want yes", got)
				}
				if got := http.Header(a.seen).Get("X-Drop-Me"); got != "" {
					t.Errorf("upstream saw x-drop-me %q, want it removed", got)
				}
				if a.header.Get("X-Added-Resp") != "yes" || a.header.Get("X-Remove-Me") != "" {
					t.Errorf("response headers %v: want x-added-resp: yes and no x-remove-me", a.header)
				}
			})
			t.Run("x-envoy and request headers", func(t *testing.T) {
				a := get(t, base+"/", nil)
				if v := a.header.Get("X-Envoy-Upstream-Service-Time"); !regexp.MustCompile(`^\d+$`).MatchString(v) {
					t.Errorf("x-envoy-upstream-service-time %q, want milliseconds", v)
				}
				seen := http.Header(a.seen)
				if !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(seen.Get("X-Request-Id")) {
					t.Errorf("upstream saw x-request-id %q, want a UUID", seen.Get("X-Request-Id"))
				}
				if seen.Get("X-Envoy-Expected-Rq-Timeout-Ms") != "15000" {
					t.Errorf("upstream saw x-envoy-expected-rq-timeout-ms %q, want 15000 (the default route timeout)", seen.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
				}
				if a.header.Get("Server") != "envoy" {
					t.Errorf("server header %q, want envoy", a.header.Get("Server"))
				}
			})
			t.Run("timeout", func(t *testing.T) {
				a := get(t, base+"/slow", nil)
				if a.code != 504 || a.body != "upstream request timeout" {
					t.Errorf("/slow: %d %q, want 504 \"upstream request timeout\"", a.code, a.body)
				}
				// Envoy's default access log format: flags UT for the upstream timeout.
				line := waitLogLine(t, logPath, `"GET /slow HTTP/1.1" 504 UT `)
				re := regexp.MustCompile(`^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] "GET /slow HTTP/1\.1" 504 UT 0 24 \d+ - "-" "Go-http-client/1\.1" "[0-9a-f-]{36}" "127\.0\.0\.1:\d+" "127\.0\.0\.1:\d+"$`)
				if !re.MatchString(line) {
					t.Errorf("access log line\n%s\ndoes not match Envoy's default format %s", line, re)
				}
			})
			t.Run("stats names and values", func(t *testing.T) {
				before := stats(t, p.admin)
				get(t, base+"/b/stats", nil)
				// Envoy counts a request when its stream completes, which may be just after the
				// client read the response: poll until the counters move (or 2 s passed).
				names := []string{"cluster.b.upstream_rq_200", "cluster.b.upstream_rq_2xx", "cluster.b.upstream_rq_total", "http.web.downstream_rq_2xx", "http.web.downstream_rq_total"}
				var after map[string]uint64
				for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					after = stats(t, p.admin)
					moved := true
					for _, name := range names {
						moved = moved && after[name] > before[name]
					}
					if moved || time.Now().After(deadline) {
						break
					}
				}
				for _, name := range names {
					if after[name] != before[name]+1 {
						t.Errorf("%s went %d -> %d, want +1", name, before[name], after[name])
					}
				}
				for _, name := range []string{"server.live", "server.hot_restart_epoch", fmt.Sprintf("listener.127.0.0.1_%d.downstream_cx_total", port)} {
					if _, ok := after[name]; !ok {
						t.Errorf("no stat %s", name)
					}
				}
				if after["server.live"] != 1 {
					t.Errorf("server.live %d, want 1", after["server.live"])
				}
			})
			t.Run("ready and server_info", func(t *testing.T) {
				resp, err := client.Get("http://" + p.admin + "/ready")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "LIVE\n" {
					t.Errorf("/ready: %d %q, want 200 \"LIVE\\n\"", resp.StatusCode, body)
				}
				resp, err = client.Get("http://" + p.admin + "/server_info")
				if err != nil {
					t.Fatal(err)
				}
				var info struct {
					State              string         `json:"state"`
					Version            string         `json:"version"`
					CommandLineOptions map[string]any `json:"command_line_options"`
				}
				err = json.NewDecoder(resp.Body).Decode(&info)
				resp.Body.Close()
				if err != nil || info.State != "LIVE" || info.Version == "" || info.CommandLineOptions["concurrency"] != float64(1) {
					t.Errorf("/server_info: %+v (%v), want state LIVE, a version and concurrency 1", info, err)
				}
			})
		})
	}
}

// waitLogLine returns the first access log line containing sub, polling: the access log
// is written after the response.
func waitLogLine(t *testing.T, path, sub string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, sub) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log line with %q in:\n%s", sub, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCommandLine pins the command line's exit codes and output shapes.
func TestCommandLine(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			argv := tg.argv(t)
			dir := t.TempDir()
			u := upstreams{a: "127.0.0.1:1", b: "127.0.0.1:1", slow: "127.0.0.1:1", flaky: "127.0.0.1:1"}
			good := filepath.Join(dir, "good.json")
			if err := os.WriteFile(good, []byte(bootstrap(t, u, freePort(t), filepath.Join(dir, "a.log"))), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, "bad.json")
			if err := os.WriteFile(bad, []byte(`{"static_resources":{"clusters":[{"name":"x","type":"STATIC","connect_timeout":"-1s"}]}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Run("validate good bootstrap", func(t *testing.T) {
				if code, out, errOut := run(t, argv, "--mode", "validate", "-c", good); code != 0 {
					t.Errorf("exit %d, want 0:\n%s%s", code, out, errOut)
				}
			})
			t.Run("validate bad bootstrap", func(t *testing.T) {
				if code, out, errOut := run(t, argv, "--mode", "validate", "-c", bad); code != 1 {
					t.Errorf("exit %d, want 1:\n%s%s", code, out, errOut)
				}
			})
			t.Run("unknown flag", func(t *testing.T) {
				code, _, errOut := run(t, argv, "--no-such-flag")
				if code != 1 || !strings.Contains(errOut, "no-such-flag") {
					t.Errorf("exit %d, stderr %q: want 1 naming the flag", code, errOut)
				}
			})
			t.Run("version", func(t *testing.T) {
				code, out, _ := run(t, argv, "--version")
				// Envoy: "\nenvoy  version: <sha>/1.x.y/Clean/RELEASE/BoringSSL\n\n"; the program
				// name is the binary's own.
				re := regexp.MustCompile(`^\n\S+( proxy)?  version: [^/\s]+/[^/\s]+/(Clean|Modified)/(RELEASE|DEBUG)/[^/\s]+\n\n$`)
				if code != 0 || !re.MatchString(out) {
					t.Errorf("exit %d, stdout %q: want 0 and %s", code, out, re)
				}
			})
		})
	}
}
