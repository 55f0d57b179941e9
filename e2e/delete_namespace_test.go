package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

// TestDeleteNamespace is the clean up nearly every Istio task page ends with, `kubectl
// delete namespace foo`, followed by the next page's `kubectl create namespace foo`:
// httpbin and sleep (Istio's samples) and an AuthorizationPolicy in foo, sleep in
// default reaching httpbin.foo; the namespace deleted (with a missing and a forbidden
// name beside it, as kubectl reports them); then get finds nothing in foo, foo is not
// listed, the pods' network namespaces and processes are gone, sleep in default no
// longer reaches httpbin.foo; foo created and applied again starts empty and works.
// Then istio-system deleted after an install: its gateways and the installed mesh config
// go, the lab's control plane stays.
func TestDeleteNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	tl := startTaskLabFrom(t, "# a cluster before the task\n")
	samples := testutil.IstioSamples(t)
	httpbin, sleep := filepath.Join(samples, "httpbin", "httpbin.yaml"), filepath.Join(samples, "sleep", "sleep.yaml")
	const policy = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-nothing
  namespace: foo
spec: {}
`
	setUp := func() {
		t.Helper()
		tl.run("create", "namespace", "foo")
		tl.run("label", "namespace", "foo", "istio-injection=enabled")
		tl.run("apply", "-n", "foo", "-f", httpbin)
		tl.run("apply", "-n", "foo", "-f", sleep)
		tl.run("wait", "--for=condition=Ready", "pod", "--all", "-n", "foo", "--timeout=90s")
	}
	tl.run("label", "namespace", "default", "istio-injection=enabled")
	tl.run("apply", "-f", sleep)
	tl.run("wait", "--for=condition=Ready", "pod", "--all", "--timeout=90s")
	setUp()
	curl := func() (string, error) {
		return meshlab(t, "--lab", tl.name, "exec", "deploy/sleep", "-c", "sleep", "--", "curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://httpbin.foo:8000/ip")
	}
	tl.poll("200 from httpbin.foo", func(out string) bool { return out == "200" }, "exec", "deploy/sleep", "-c", "sleep", "--", "curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://httpbin.foo:8000/ip")
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	tl.run("apply", "-f", policyFile)
	if out := tl.run("get", "authorizationpolicy", "-n", "foo"); !strings.Contains(out, "allow-nothing") {
		t.Fatalf("get authorizationpolicy -n foo:\n%s", out)
	}

	// The pods of foo: their network namespaces, and the processes in them.
	nss, err := netns.List("ml-" + tl.name + "-")
	if err != nil {
		t.Fatal(err)
	}
	var fooNS []string
	var pids []int
	for _, n := range nss {
		if !strings.HasSuffix(n, ".foo") {
			continue
		}
		fooNS = append(fooNS, n)
		out, err := exec.Command("ip", "netns", "pids", n).Output()
		if err != nil {
			t.Fatalf("ip netns pids %s: %v", n, err)
		}
		for _, f := range strings.Fields(string(out)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("ip netns pids %s: %q", n, out)
			}
			pids = append(pids, pid)
		}
	}
	if len(fooNS) != 2 || len(pids) == 0 {
		t.Fatalf("foo's pods' network namespaces %q (of %q), processes %v: want httpbin's and sleep's, with processes", fooNS, nss, pids)
	}

	tl.step("delete namespace foo")
	out, err := meshlab(t, "--lab", tl.name, "delete", "namespace", "foo", "nothere", "default")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("delete namespace foo nothere default: %v, want exit status 1\n%s", err, out)
	}
	for _, line := range []string{
		`namespace "foo" deleted`,
		`Error from server (NotFound): namespaces "nothere" not found`,
		`Error from server (Forbidden): namespaces "default" is forbidden: this namespace may not be deleted`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("delete namespace foo nothere default printed:\n%s\nwant the line %q", out, line)
		}
	}
	if out := tl.run("get", "ns"); strings.Contains(out, "foo ") || !strings.Contains(out, "default ") {
		t.Errorf("get ns after the delete:\n%s\nwant default, and no foo", out)
	}
	for _, kind := range []string{"pods", "svc", "deploy", "sa", "authorizationpolicy"} {
		if out := tl.run("get", kind, "-n", "foo"); out != "No resources found in foo namespace.\n" {
			t.Errorf("get %s -n foo after the delete:\n%s\nwant none", kind, out)
		}
	}
	if out := tl.run("get", "pods"); !strings.Contains(out, "sleep-") {
		t.Errorf("get pods (default) after deleting foo:\n%s\nwant sleep still there", out)
	}
	left, err := netns.List("ml-" + tl.name + "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if strings.HasSuffix(n, ".foo") {
			t.Errorf("network namespace %s left after deleting foo", n)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d of foo's pods still there after deleting foo (kill 0: %v)", pid, err)
		}
	}
	// One change, one push: the default sleep's proxy got one version for all of foo.
	sleepPod := strings.TrimSpace(tl.run("get", "pod", "-l", "app=sleep", "-o", "jsonpath={.items..metadata.name}"))
	var pushes []string
	for _, line := range strings.Split(tl.run("history", sleepPod), "\n") {
		if strings.Contains(line, "Deployment foo/httpbin deleted") {
			pushes = append(pushes, line)
		}
	}
	if len(pushes) != 1 || !strings.Contains(pushes[0], "AuthorizationPolicy foo/allow-nothing deleted") || !strings.Contains(pushes[0], "Service foo/sleep deleted") {
		t.Errorf("history %s: versions pushed for foo's deletion:\n%s\nwant one, for every object of foo", sleepPod, strings.Join(pushes, "\n"))
	}
	if out, err := curl(); err == nil || out == "200" {
		t.Errorf("sleep in default reached httpbin.foo after foo was deleted: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "--lab", tl.name, "delete", "ns", "foo", "--ignore-not-found"); err != nil || out != "" {
		t.Errorf("delete ns foo --ignore-not-found once foo is gone: %v\n%q, want nothing, exit 0", err, out)
	}

	tl.step("create namespace foo again")
	setUp()
	if out := tl.run("get", "authorizationpolicy", "-n", "foo"); out != "No resources found in foo namespace.\n" {
		t.Errorf("get authorizationpolicy -n foo in foo created again:\n%s\nwant none: a namespace created again starts empty", out)
	}
	tl.poll("200 from httpbin.foo", func(out string) bool { return out == "200" }, "exec", "deploy/sleep", "-c", "sleep", "--", "curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://httpbin.foo:8000/ip")

	// The pages that delete istio-system run istioctl uninstall --purge first; deleting
	// it also does what that does: the profile's gateways go with the installed mesh
	// config, and the lab's control plane stays (sleep still reaches httpbin.foo).
	tl.step("delete ns istio-system after an install of the demo profile")
	tl.run("install", "--set", "profile=demo", "-y")
	if out := tl.run("get", "pods", "-n", "istio-system"); !strings.Contains(out, "istio-ingressgateway-") {
		t.Fatalf("get pods -n istio-system after install --set profile=demo:\n%s\nwant the ingress gateway", out)
	}
	if out := tl.run("delete", "ns", "istio-system"); out != "namespace \"istio-system\" deleted\n" {
		t.Errorf("delete ns istio-system printed %q", out)
	}
	if out := tl.run("get", "pods", "-n", "istio-system"); out != "No resources found in istio-system namespace.\n" {
		t.Errorf("get pods -n istio-system after deleting it:\n%s\nwant none", out)
	}
	if out := tl.run("get", "meshconfig", "-A"); strings.Contains(out, "mesh") {
		t.Errorf("get meshconfig -A after deleting istio-system:\n%s\nwant the installed mesh config gone, as uninstall --purge", out)
	}
	tl.poll("200 from httpbin.foo", func(out string) bool { return out == "200" }, "exec", "deploy/sleep", "-c", "sleep", "--", "curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://httpbin.foo:8000/ip")
}
