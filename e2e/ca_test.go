package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// caStatus runs `meshlab ca status -o json`.
func caStatus(t *testing.T, name string) api.CAStatus {
	t.Helper()
	out, err := meshlab(t, "ca", "status", "--name", name, "-o", "json")
	if err != nil {
		t.Fatalf("meshlab ca status: %v\n%s", err, out)
	}
	var st api.CAStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("decode ca status: %v\n%s", err, out)
	}
	return st
}

// TestRootRotationUnderLoad: `meshlab ca rotate-root` on a hello lab while the frontend
// sends requests through both sidecars: no request fails, every pod's certificate then
// chains to the new root alone, the pods stay ready, and the new root's key is in the
// run directory with mode 0600. Then a CA clock offset of -25h makes the certificates
// expired on issue and `meshlab describe pod` explains it; --reset fixes it.
func TestRootRotationUnderLoad(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	paths := lab.PathsFor(lab.DefaultRunRoot, l.name)
	lc := api.NewUnixClient(paths.APISocket())
	t.Cleanup(lc.Close)

	before := caStatus(t, l.name)
	if before.Phase != "stable" || len(before.Bundle) != 1 || len(before.Pods) != 3 {
		t.Fatalf("initial CA status %+v", before)
	}
	// One request per upstream connection: every request of the load is a fresh mTLS
	// handshake between the sidecars, so each phase of the rotation is crossed by
	// handshakes, not only by one pooled connection.
	drFile := filepath.Join(t.TempDir(), "dr.yaml")
	if err := os.WriteFile(drFile, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend, namespace: default}
spec:
  host: backend
  trafficPolicy:
    connectionPool:
      http: {maxRequestsPerConnection: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", drFile); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	load := startLoad(t, l.name, "frontend-v1", podIP(t, lc, "backend-v1"), 100)
	okBefore := load.ok.Load()
	// Twice: the second rotation starts from a rotated root (files ca-root-2 and -3).
	var out string
	for range 2 {
		var err error
		if out, err = meshlab(t, "ca", "rotate-root", "--name", l.name); err != nil {
			t.Fatalf("meshlab ca rotate-root: %v\n%s", err, out)
		}
		t.Logf("%s", strings.TrimSpace(out))
	}
	// At least 200 requests from the start of the rotations.
	deadline := time.Now().Add(20 * time.Second)
	for load.ok.Load()+load.failed.Load()-okBefore < 200 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ok, failed, errs := load.stop()
	if failed != 0 || ok-okBefore < 200 {
		t.Fatalf("during the rotation: %d ok, %d failed, e.g. %q; want >= 200 ok, 0 failed", ok-okBefore, failed, errs)
	}

	// A new frontend epoch handshakes again, with the new certificates.
	handshakes := func() string {
		c := agentapi.NewClient(paths.AgentSocket("backend-v1"))
		defer c.Close()
		b, err := c.AdminBytes(t.Context(), "stats?filter=ssl.handshake")
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(string(b))
	}
	hsBefore := handshakes()
	if out, err := meshlab(t, "proxy", "restart", "frontend-v1", "--name", l.name); err != nil {
		t.Fatalf("meshlab proxy restart: %v\n%s", err, out)
	}
	again := startLoad(t, l.name, "frontend-v1", podIP(t, lc, "backend-v1"), 100)
	if ok, failed, errs := again.stop(); failed != 0 {
		t.Fatalf("after the rotation and a new frontend epoch: %d ok, %d failed, e.g. %q", ok, failed, errs)
	}
	// With auto-mTLS (PERMISSIVE by default) the new epoch's connection is mTLS: the
	// backend's sidecar, never restarted, presents the certificate SDS pushed it.
	hsAfter := handshakes()
	t.Logf("backend-v1 inbound TLS handshakes: before the new epoch %q, after %q", hsBefore, hsAfter)
	if hsBefore != "" && hsAfter == hsBefore {
		t.Errorf("no new TLS handshake at the backend after a new frontend epoch: %q", hsAfter)
	}
	out, err := meshlab(t, "describe", "pod", "backend-v1", "--name", l.name)
	if err != nil || !strings.Contains(out, "meshlab root CA 3") || strings.Contains(out, "Problem:") {
		t.Errorf("describe pod after the rotation does not show the new root: %v\n%s", err, out)
	}

	after := caStatus(t, l.name)
	if after.Phase != "stable" || len(after.Bundle) != 1 || after.Signing.Serial == before.Signing.Serial || after.CrossSigned != nil {
		t.Fatalf("CA after rotation: %+v", after)
	}
	for _, p := range after.Pods {
		if p.IssuingRoot != after.Signing.Serial || len(p.Bundle) != 1 || p.Bundle[0] != after.Signing.Serial || p.Error != "" {
			t.Errorf("pod %s after rotation: %+v, want issued by and trusting %s alone", p.Pod, p, after.Signing.Serial)
		}
	}
	pods, err := lc.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if !p.Ready {
			t.Errorf("pod %s not ready after the rotation: %s", p.Name, p.Message)
		}
	}
	for _, f := range []string{"ca-root-2-key.pem", "ca-root-3-key.pem", "ca-key.pem"} {
		if fi, err := os.Stat(filepath.Join(paths.Dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("root key %s in the run directory: %v %v, want mode 0600", f, fi, err)
		}
	}

	// Expired on issue: describe explains it; reset fixes it.
	if out, err := meshlab(t, "ca", "clock", "--name", l.name, "--offset", "-25h"); err != nil {
		t.Fatalf("meshlab ca clock: %v\n%s", err, out)
	}
	out, err = meshlab(t, "describe", "pod", "backend-v1", "--name", l.name)
	if err != nil || !strings.Contains(out, "Problem:") || !strings.Contains(out, "certificate has expired") {
		t.Fatalf("describe pod after a -25h CA clock: %v\n%s", err, out)
	}
	// burst sends 20 requests from the frontend through both sidecars (each a fresh mTLS
	// handshake between them, see the DestinationRule above) and counts the answers.
	client := podClient(lab.NamespaceName(l.name, "frontend-v1"))
	client.Transport.(*http.Transport).DisableKeepAlives = true
	burst := func() (ok, failed int, errs []string) {
		for range 20 {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+net.JoinHostPort(podIP(t, lc, "backend-v1"), "8080")+"/", nil)
			req.Host = "backend:8080"
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %s", resp.Status)
				}
			}
			if err != nil {
				failed++
				errs = append(errs, err.Error())
				continue
			}
			ok++
		}
		return ok, failed, errs
	}
	if ok, failed, errs := burst(); ok != 0 || failed == 0 {
		t.Errorf("with expired certificates: %d ok, %d failed (%q); want every request to fail the TLS handshake", ok, failed, errs)
	}
	if out, err := meshlab(t, "ca", "clock", "--name", l.name, "--reset"); err != nil {
		t.Fatalf("meshlab ca clock --reset: %v\n%s", err, out)
	}
	if ok, failed, errs := burst(); failed != 0 || ok == 0 {
		t.Errorf("after the clock reset: %d ok, %d failed (%q); want every request to succeed", ok, failed, errs)
	}
	out, err = meshlab(t, "describe", "pod", "backend-v1", "--name", l.name)
	if err != nil || strings.Contains(out, "Problem:") {
		t.Fatalf("describe pod after the reset: %v\n%s", err, out)
	}
}
