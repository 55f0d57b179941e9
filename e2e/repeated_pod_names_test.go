package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// The samples as the mtls-migration task applies them, `kubectl apply -f
// samples/httpbin/httpbin.yaml -n foo`: no object names a namespace.
const (
	httpbinSample = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: httpbin
---
apiVersion: v1
kind: Service
metadata:
  name: httpbin
  labels: {app: httpbin, service: httpbin}
spec:
  ports:
  - name: http
    port: 8000
    targetPort: 8080
  selector: {app: httpbin}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: httpbin
spec:
  replicas: 1
  selector:
    matchLabels: {app: httpbin, version: v1}
  template:
    metadata:
      labels: {app: httpbin, version: v1}
    spec:
      serviceAccountName: httpbin
      containers:
      - image: docker.io/mccutchen/go-httpbin:v2.15.0
        imagePullPolicy: IfNotPresent
        name: httpbin
        ports:
        - containerPort: 8080
`
	curlSample = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: curl
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: curl
spec:
  replicas: 1
  selector:
    matchLabels: {app: curl}
  template:
    metadata:
      labels: {app: curl}
    spec:
      terminationGracePeriodSeconds: 0
      serviceAccountName: curl
      containers:
      - name: curl
        image: curlimages/curl
        command: ["/bin/sleep", "infinity"]
        imagePullPolicy: IfNotPresent
`
)

// TestRepeatedPodNamesMTLSMigration is Istio's mutual TLS migration task in its own form:
// the httpbin and curl samples applied with -n to foo, bar (injected) and legacy (not), so
// each namespace holds pods of the same names, as Kubernetes allows; the task's loop
// finds each curl pod with `get pod -l app=curl -n NS -o jsonpath={.items..metadata.name}`
// and execs into it with `-c curl -n NS`. A pod's namespace, run directory and API key
// are its namespace's own; a bare name that several namespaces hold asks for -n; a
// Deployment deleted from one namespace leaves its namesakes running.
func TestRepeatedPodNamesMTLSMigration(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, writeTemp(t, "namespaces.yaml", `apiVersion: v1
kind: Namespace
metadata:
  name: foo
  labels: {istio-injection: enabled}
---
apiVersion: v1
kind: Namespace
metadata:
  name: bar
  labels: {istio-injection: enabled}
---
apiVersion: v1
kind: Namespace
metadata:
  name: legacy
`))
	run := func(args ...string) (string, error) {
		t.Helper()
		return meshlab(t, append(args[:1:1], append([]string{"--name", l.name}, args[1:]...)...)...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	httpbin, curl := writeTemp(t, "httpbin.yaml", httpbinSample), writeTemp(t, "curl.yaml", curlSample)
	for _, ns := range []string{"foo", "bar", "legacy"} {
		must("apply", "-f", httpbin, "-n", ns)
		must("apply", "-f", curl, "-n", ns)
	}

	// One name per sample, in every namespace.
	pods := map[string]string{}
	for _, ns := range []string{"foo", "bar", "legacy"} {
		for _, app := range []string{"curl", "httpbin"} {
			pods[app+"."+ns] = must("get", "pod", "-l", "app="+app, "-n", ns, "-o", "jsonpath={.items..metadata.name}")
		}
	}
	curlPod, httpbinPod := pods["curl.foo"], pods["httpbin.foo"]
	if !regexp.MustCompile(`^curl-[a-z0-9]+-[a-z0-9]{5}$`).MatchString(curlPod) || !strings.HasPrefix(httpbinPod, "httpbin-") {
		t.Fatalf("pods %v", pods)
	}
	for k, v := range pods {
		if want := map[bool]string{true: curlPod, false: httpbinPod}[strings.HasPrefix(k, "curl.")]; v != want {
			t.Fatalf("%s is %q, want %q: one Deployment makes the same pod name in every namespace (%v)", k, v, want, pods)
		}
	}
	for _, ns := range []string{"foo", "bar", "legacy"} {
		if nsName := lab.NamespaceName(l.name, curlPod+"."+ns); !netns.Exists(nsName) {
			t.Errorf("network namespace %s of pod %s/%s does not exist", nsName, ns, curlPod)
		}
	}

	// A bare name three namespaces hold asks for -n; -n, and istioctl's NAME.NAMESPACE, choose.
	if out, err := run("exec", curlPod, "--", "hostname"); err == nil || !strings.Contains(out, "is in namespaces bar, foo, legacy") || !strings.Contains(out, "-n NAMESPACE") {
		t.Fatalf("exec %s without -n: %v\n%s", curlPod, err, out)
	}
	if out := must("exec", "-n", "bar", curlPod, "--", "hostname"); strings.TrimSpace(out) != curlPod {
		t.Fatalf("exec -n bar %s -- hostname: %q", curlPod, out)
	}
	if out := must("describe", "pod", curlPod+".legacy"); !regexp.MustCompile(`(?m)^Namespace:\s+legacy$`).MatchString(out) {
		t.Fatalf("describe pod %s.legacy:\n%s", curlPod, out)
	}
	if out := must("describe", "pod", "-n", "foo", curlPod); !regexp.MustCompile(`(?m)^Namespace:\s+foo$`).MatchString(out) {
		t.Fatalf("describe pod -n foo %s:\n%s", curlPod, out)
	}
	if out := must("proxy-config", "cluster", "-n", "bar", httpbinPod, "--fqdn", "httpbin.foo.svc.cluster.local"); !strings.Contains(out, "httpbin.foo.svc.cluster.local") {
		t.Fatalf("proxy-config cluster -n bar %s:\n%s", httpbinPod, out)
	}
	if out, err := run("proxy-config", "cluster", httpbinPod); err == nil || !strings.Contains(out, "choose one with -n") {
		t.Fatalf("proxy-config cluster %s without -n: %v\n%s", httpbinPod, err, out)
	}
	must("logs", "-n", "legacy", curlPod)
	if out := must("proxy-status"); strings.Count(out, curlPod) != 2 || strings.Count(out, httpbinPod) != 2 {
		t.Fatalf("proxy-status: want the curl and httpbin proxies of foo and bar (legacy has no sidecars):\n%s", out)
	}

	// The task's loop: for from in foo bar legacy; for to in foo bar.
	check := func(want map[string]string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := map[string]string{}
			for _, from := range []string{"foo", "bar", "legacy"} {
				pod := must("get", "pod", "-l", "app=curl", "-n", from, "-o", "jsonpath={.items..metadata.name}")
				for _, to := range []string{"foo", "bar"} {
					out, code := execIn(t, l.name, []string{"-c", "curl", "-n", from}, pod, "curl", "--max-time", "5", "http://httpbin."+to+":8000/ip", "-s", "-o", "/dev/null", "-w", "%{http_code}")
					// kubectl's "command terminated with exit code N" line follows a failure.
					out, _, _ = strings.Cut(out, "command terminated with exit code")
					got["curl."+from+" to httpbin."+to] = out + " exit " + strconv.Itoa(code)
				}
			}
			same := true
			for k, v := range want {
				same = same && got[k] == v
			}
			if same {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v\nwant %v", got, want)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	ok, refused := "200 exit 0", "000 exit 56"
	check(map[string]string{
		"curl.foo to httpbin.foo": ok, "curl.foo to httpbin.bar": ok, "curl.bar to httpbin.foo": ok,
		"curl.bar to httpbin.bar": ok, "curl.legacy to httpbin.foo": ok, "curl.legacy to httpbin.bar": ok,
	})
	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "foo"
spec:
  mtls:
    mode: STRICT
`)
	check(map[string]string{
		"curl.foo to httpbin.foo": ok, "curl.bar to httpbin.foo": ok, "curl.bar to httpbin.bar": ok,
		"curl.legacy to httpbin.foo": refused, "curl.legacy to httpbin.bar": ok,
	})

	// Deleting bar's curl leaves foo's and legacy's namesakes as they were.
	must("delete", "-f", curl, "-n", "bar")
	if netns.Exists(lab.NamespaceName(l.name, curlPod+".bar")) || !netns.Exists(lab.NamespaceName(l.name, curlPod+".foo")) {
		t.Fatalf("after delete -n bar: the namespace of bar's %s should be gone and foo's still there", curlPod)
	}
	if out, err := run("exec", "-n", "bar", curlPod, "--", "hostname"); err == nil || !strings.Contains(out, "in namespace bar") {
		t.Fatalf("exec -n bar after delete: %v\n%s", err, out)
	}
	if out, code := execIn(t, l.name, []string{"-n", "foo"}, curlPod, "curl", "--max-time", "5", "http://httpbin.foo:8000/ip", "-s", "-o", "/dev/null", "-w", "%{http_code}"); out != "200" {
		t.Fatalf("foo's %s after bar's was deleted: %q exit %d", curlPod, out, code)
	}
}
