package e2e

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// helloWithMeshConfig appends a MeshConfig with spec to the hello scenario and returns the
// file's path.
func helloWithMeshConfig(t *testing.T, spec string) string {
	t.Helper()
	hello, err := os.ReadFile("../scenarios/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(hello) + "\n---\napiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec: " + spec + "\n"
	path := filepath.Join(t.TempDir(), "hello-mesh.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// requestWithID sends one GET from frontend-v1 to backend tagged with id.
func requestWithID(t *testing.T, lab, id string) {
	t.Helper()
	out, err := meshlab(t, "exec", "--name", lab, "frontend-v1", "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "x-request-id: "+id, "http://backend:8080/")
	if err != nil || out != "200" {
		t.Fatalf("curl from frontend-v1: %v: %q", err, out)
	}
}

// proxyLogLine polls `meshlab logs POD -c proxy` until a line contains id.
func proxyLogLine(t *testing.T, lab, pod, id string, wait time.Duration) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		out, err := meshlab(t, "logs", "--name", lab, pod, "-c", "proxy")
		if err != nil {
			t.Fatalf("meshlab logs %s -c proxy: %v\n%s", pod, err, out)
		}
		if line := lineWith(out, id); line != "" {
			return line, true
		}
		if time.Now().After(deadline) {
			return "", false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// backendLine returns the backend pod whose proxy logged id, and the line.
func backendLine(t *testing.T, lab, id string) (string, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, pod := range []string{"backend-v1", "backend-v2"} {
			if line, ok := proxyLogLine(t, lab, pod, id, 0); ok {
				return pod, line
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no backend proxy logged %s", id)
	return "", ""
}

// isAddrPort reports whether s is an ip:port with a port.
func isAddrPort(s string) bool {
	ap, err := netip.ParseAddrPort(s)
	return err == nil && ap.Port() != 0
}

// TestAccessLogs checks that every proxy writes Istio's access log lines to its stdout,
// which `meshlab logs POD -c proxy` shows: by default in Istio's TEXT format, as JSON with
// accessLogEncoding JSON, and nothing with accessLogFile "".
func TestAccessLogs(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	const cluster = "outbound|8080||backend.default.svc.cluster.local"
	const sni = "outbound_.8080_._.backend.default.svc.cluster.local" // Istio's SNI for the mTLS hop

	t.Run("text", func(t *testing.T) {
		t.Parallel()
		l := startLab(t)
		id := "z1-text-" + l.name
		requestWithID(t, l.name, id)
		line, ok := proxyLogLine(t, l.name, "frontend-v1", id, 10*time.Second)
		if !ok {
			t.Fatalf("frontend-v1's proxy log has no line with %s", id)
		}
		for _, want := range []string{`"GET / HTTP/1.1" 200 `, `"` + id + `"`, `"backend:8080"`, " " + cluster + " ", " default"} {
			if !strings.Contains(line, want) {
				t.Errorf("outbound line %q; want it to contain %q", line, want)
			}
		}
		_, in := backendLine(t, l.name, id)
		t.Logf("outbound: %s\ninbound:  %s", line, in)
		for _, want := range []string{`"GET / HTTP/1.1" 200 `, " inbound|8080|| ", `"` + id + `"`, " " + sni + " "} {
			if !strings.Contains(in, want) {
				t.Errorf("inbound line %q; want it to contain %q", in, want)
			}
		}
		// Istio's TEXT format has %UPSTREAM_LOCAL_ADDRESS% right after the cluster.
		if _, rest, ok := strings.Cut(line, " "+cluster+" "); !ok || len(strings.Fields(rest)) == 0 || !isAddrPort(strings.Fields(rest)[0]) {
			t.Errorf("outbound line %q; want the upstream local address after the cluster", line)
		}
	})

	// Envoy's connection fields, which Istio's TEXT format partly leaves out: the inbound
	// line of an mTLS request names the filter chain that took it and the SNI the client
	// sidecar sent; the outbound line has the proxy's end of its upstream connection.
	t.Run("connection_fields", func(t *testing.T) {
		t.Parallel()
		l := startLab(t, helloWithMeshConfig(t, `{accessLogEncoding: JSON, accessLogFormat: '{"request_id": "%REQ(X-REQUEST-ID)%", "filter_chain": "%FILTER_CHAIN_NAME%", "sni": "%REQUESTED_SERVER_NAME%", "upstream_local": "%UPSTREAM_LOCAL_ADDRESS%", "tls_failure": "%UPSTREAM_TRANSPORT_FAILURE_REASON%"}'}`))
		id := "a2-conn-" + l.name
		requestWithID(t, l.name, id)
		line, ok := proxyLogLine(t, l.name, "frontend-v1", id, 10*time.Second)
		if !ok {
			t.Fatalf("frontend-v1's proxy log has no line with %s", id)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(line), &out); err != nil {
			t.Fatalf("outbound line %q is not JSON: %v", line, err)
		}
		if ul, _ := out["upstream_local"].(string); !isAddrPort(ul) || out["sni"] != nil || out["tls_failure"] != nil {
			t.Errorf("outbound line %v; want upstream_local ip:port, no sni (plaintext from the app), no tls_failure", out)
		}
		_, in := backendLine(t, l.name, id)
		var inOut map[string]any
		if err := json.Unmarshal([]byte(in), &inOut); err != nil {
			t.Fatalf("inbound line %q is not JSON: %v", in, err)
		}
		if inOut["filter_chain"] != "0.0.0.0_8080" || inOut["sni"] != sni {
			t.Errorf("inbound line %v; want filter_chain 0.0.0.0_8080 and sni %s", inOut, sni)
		}
		if ul, _ := inOut["upstream_local"].(string); !isAddrPort(ul) {
			t.Errorf("inbound line %v; want upstream_local ip:port", inOut)
		}
	})

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		l := startLab(t, helloWithMeshConfig(t, "{accessLogEncoding: JSON}"))
		id := "z1-json-" + l.name
		requestWithID(t, l.name, id)
		line, ok := proxyLogLine(t, l.name, "frontend-v1", id, 10*time.Second)
		if !ok {
			t.Fatalf("frontend-v1's proxy log has no line with %s", id)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(line), &out); err != nil {
			t.Fatalf("outbound line %q is not JSON: %v", line, err)
		}
		if out["request_id"] != id || out["response_code"] != float64(200) || out["upstream_cluster"] != cluster || out["route_name"] != "default" {
			t.Errorf("outbound JSON line %v; want request_id %s, response_code 200, upstream_cluster %s, route_name default", out, id, cluster)
		}
		_, in := backendLine(t, l.name, id)
		var inOut map[string]any
		if err := json.Unmarshal([]byte(in), &inOut); err != nil || inOut["upstream_cluster"] != "inbound|8080||" || inOut["response_code"] != float64(200) {
			t.Errorf("inbound JSON line %q (%v); want inbound|8080|| and 200", in, err)
		}
	})

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		l := startLab(t, helloWithMeshConfig(t, `{accessLogFile: ""}`))
		id := "z1-off-" + l.name
		requestWithID(t, l.name, id)
		// The request has been answered, so both proxies are done with it; a line would be
		// written by now (with logs on, it is before the client has the last byte or within
		// milliseconds of it).
		if line, ok := proxyLogLine(t, l.name, "frontend-v1", id, 300*time.Millisecond); ok {
			t.Errorf("access logs off, but frontend-v1's proxy logged %q", line)
		}
	})
}
