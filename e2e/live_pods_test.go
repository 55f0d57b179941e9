package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// TestLivePods deploys Istio's sample apps into a running lab as the docs' tasks do
// (`kubectl apply -f samples/httpbin/httpbin.yaml`, `kubectl apply -f samples/curl/curl.yaml`),
// then scales, exposes through a Gateway applied later, and deletes, checking each time
// what Kubernetes would show: new pods with their own namespaces, sidecars and mTLS; the
// running pod's address untouched; both replicas answering; a deleted Deployment's pods
// gone everywhere (namespaces, links, processes, proxy-status, lab.json) and its Service
// answering 503 "no healthy upstream"; a deleted Service no longer resolving; and nothing
// left after down.
func TestLivePods(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/live-pods-base.yaml")
	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	defer c.Close()
	podsNow := func() map[string]api.PodStatus {
		t.Helper()
		ps, err := c.Pods(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]api.PodStatus{}
		for _, p := range ps {
			out[p.Name] = p
		}
		return out
	}
	greeter := podsNow()["greeter-v1"]
	if !greeter.Ready {
		t.Fatalf("greeter-v1 not ready at up: %+v", greeter)
	}

	// Deploy httpbin and curl into the running lab.
	out, err := meshlab(t, "apply", "--name", l.name, "-f", "testdata/live-pods-httpbin.yaml", "-f", "testdata/live-pods-curl.yaml")
	if err != nil {
		t.Fatalf("apply httpbin and curl: %v\n%s", err, out)
	}
	created := regexp.MustCompile(`(?m)^pod default/((httpbin|curl)-[a-z0-9]+-[a-z0-9]{5}) created$`).FindAllStringSubmatch(out, -1)
	if len(created) != 2 || !strings.Contains(out, "deployment.apps/httpbin created") {
		t.Fatalf("apply httpbin and curl:\n%s\nwant both Deployments created and one pod of each created", out)
	}
	pods := podsNow()
	if got := pods["greeter-v1"]; got.IP != greeter.IP || !got.Ready {
		t.Errorf("greeter-v1 after apply: %+v; want it untouched at %s", got, greeter.IP)
	}
	var firstHTTPBin string
	for _, m := range created {
		if p, ok := pods[m[1]]; !ok || !p.Ready || !p.Sidecar {
			t.Errorf("pod %s after apply: %+v; want a ready pod with a sidecar", m[1], p)
		}
		if m[2] == "httpbin" {
			firstHTTPBin = m[1]
		}
	}
	status, body := curlFrom(t, l.name, "http://httpbin:8000/headers")
	if status != 200 {
		t.Fatalf("curl httpbin:8000/headers from the curl pod: %d\n%s", status, body)
	}
	var h struct{ Headers map[string]string }
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("/headers is not httpbin's JSON: %v\n%s", err, body)
	}
	if xfcc := h.Headers["X-Forwarded-Client-Cert"]; !strings.Contains(xfcc, "URI=spiffe://cluster.local/ns/default/sa/curl") {
		t.Errorf("httpbin saw X-Forwarded-Client-Cert %q; want the curl pod's identity (mTLS between the new pods' sidecars)", xfcc)
	}

	// Scale httpbin to 2: one pod more, the first one kept.
	scaled, err := os.ReadFile("testdata/live-pods-httpbin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(t.TempDir(), "httpbin-2.yaml")
	if err := os.WriteFile(two, []byte(strings.Replace(string(scaled), "replicas: 1", "replicas: 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = meshlab(t, "apply", "--name", l.name, "-f", two)
	if err != nil {
		t.Fatalf("scale httpbin to 2: %v\n%s", err, out)
	}
	added := regexp.MustCompile(`(?m)^pod default/(httpbin-[a-z0-9]+-[a-z0-9]{5}) created$`).FindAllStringSubmatch(out, -1)
	if len(added) != 1 || strings.Contains(out, "deleted") || !strings.Contains(out, "deployment.apps/httpbin configured") {
		t.Fatalf("scale httpbin to 2:\n%s\nwant one pod created and none deleted", out)
	}
	pods = podsNow()
	httpbins := []string{firstHTTPBin, added[0][1]}
	for _, name := range httpbins {
		p := pods[name]
		if !p.Ready {
			t.Fatalf("httpbin pod %s after scaling: %+v; want ready", name, p)
		}
		// Each replica answers on its own address, through both sidecars.
		if status, body := curlFrom(t, l.name, fmt.Sprintf("http://%s:80/get", p.IP)); status != 200 {
			t.Errorf("curl %s (pod %s) directly: %d\n%s", p.IP, name, status, body)
		}
	}
	for range 12 {
		if status, body := curlFrom(t, l.name, "http://httpbin:8000/get"); status != 200 {
			t.Fatalf("curl httpbin:8000/get with 2 replicas: %d\n%s", status, body)
		}
	}
	clusters, err := meshlab(t, "exec", "--name", l.name, "deploy/curl", "--", "curl", "-sS", "--max-time", "5", "http://localhost:15000/clusters")
	if err != nil {
		t.Fatalf("curl's proxy /clusters: %v\n%s", err, clusters)
	}
	for _, name := range httpbins {
		re := regexp.MustCompile(`outbound\|8000\|\|httpbin\.default\.svc\.cluster\.local::` + regexp.QuoteMeta(pods[name].IP.String()) + `:80::rq_total::(\d+)`)
		m := re.FindStringSubmatch(clusters)
		if m == nil {
			t.Errorf("curl's sidecar has no endpoint %s (%s) for httpbin:\n%s", pods[name].IP, name, clusters)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n == 0 {
			t.Errorf("curl's sidecar sent no request to %s (%s) through the Service", name, pods[name].IP)
		}
	}

	// A Gateway applied to the running lab brings its gateway pod, which routes to httpbin.
	gw := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(gw, []byte(liveGateway), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = meshlab(t, "apply", "--name", l.name, "-f", gw)
	if err != nil || !regexp.MustCompile(`(?m)^pod istio-system/istio-ingressgateway-\S+ created$`).MatchString(out) {
		t.Fatalf("apply a Gateway: %v\n%s\nwant the ingress gateway's pod created", err, out)
	}
	if status, body := curlFrom(t, l.name, "http://istio-ingressgateway.istio-system/status/418"); status != 418 {
		t.Errorf("curl through the ingress gateway applied later: %d\n%s", status, body)
	}

	// Delete the Deployment: its pods go everywhere; its Service stays, without endpoints.
	out, err = meshlab(t, "delete", "--name", l.name, "deployment", "httpbin")
	if err != nil {
		t.Fatalf("delete deployment httpbin: %v\n%s", err, out)
	}
	for _, name := range httpbins {
		if !strings.Contains(out, "pod default/"+name+" deleted\n") {
			t.Errorf("delete deployment httpbin:\n%s\nwant pod %s deleted", out, name)
		}
		checkPodGone(t, l.name, name)
	}
	if status, body := curlFrom(t, l.name, "http://httpbin:8000/headers"); status != 503 || !strings.Contains(body, "no healthy upstream") {
		t.Errorf("curl httpbin:8000 after its Deployment was deleted: %d %q; want 503 no healthy upstream", status, body)
	}
	if out, err := meshlab(t, "exec", "--name", l.name, "deploy/httpbin", "--", "true"); err == nil {
		t.Errorf("exec deploy/httpbin after its deletion succeeded:\n%s", out)
	}
	if got := podsNow()["greeter-v1"]; got.IP != greeter.IP || !got.Ready {
		t.Errorf("greeter-v1 after the deletion: %+v; want it untouched", got)
	}

	// Delete the Gateway and its VirtualService: the gateway's pod goes with them.
	out, err = meshlab(t, "delete", "--name", l.name, "-f", gw)
	gwPod := regexp.MustCompile(`(?m)^pod istio-system/(istio-ingressgateway-\S+) deleted$`).FindStringSubmatch(out)
	if err != nil || gwPod == nil {
		t.Fatalf("delete the Gateway: %v\n%s\nwant the ingress gateway's pod deleted", err, out)
	}
	checkPodGone(t, l.name, gwPod[1])

	// Delete the Service: its name no longer resolves (curl's exit 6).
	if out, err := meshlab(t, "delete", "--name", l.name, "service", "httpbin"); err != nil {
		t.Fatalf("delete service httpbin: %v\n%s", err, out)
	}
	out, err = meshlab(t, "exec", "--name", l.name, "deploy/curl", "--", "curl", "-sS", "--max-time", "5", "http://httpbin:8000/headers")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 6 {
		t.Errorf("curl httpbin after the Service was deleted: %v\n%s\nwant curl's exit 6 (could not resolve host)", err, out)
	}

	if out, err := meshlab(t, "down", "--name", l.name); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	assertNothingLeft(t, l.name)
}

// liveGateway exposes httpbin on Istio's ingress gateway, as the ingress task does.
const liveGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: httpbin-gateway
spec:
  selector:
    istio: ingressgateway
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: httpbin
spec:
  hosts: ["*"]
  gateways: [httpbin-gateway]
  http:
  - route:
    - destination: {host: httpbin, port: {number: 8000}}
`

// curlFrom runs curl in the lab's curl pod and returns the status code and body.
func curlFrom(t *testing.T, labName, url string) (int, string) {
	t.Helper()
	out, err := meshlab(t, "exec", "--name", labName, "deploy/curl", "--", "curl", "-sS", "--max-time", "5", "-w", "\n%{http_code}", url)
	if err != nil {
		t.Fatalf("curl %s from the curl pod: %v\n%s", url, err, out)
	}
	i := strings.LastIndexByte(out, '\n')
	code, err := strconv.Atoi(strings.TrimSpace(out[i+1:]))
	if err != nil {
		t.Fatalf("curl %s: no status code in:\n%s", url, out)
	}
	return code, out[:max(i, 0)]
}

// checkPodGone checks that a deleted pod left nothing: no namespace, no link in the
// node namespace, no process, no run directory, no proxy in proxy-status, no entry in
// lab.json.
func checkPodGone(t *testing.T, labName, pod string) {
	t.Helper()
	if ns := lab.NamespaceName(labName, pod); netns.Exists(ns) {
		t.Errorf("namespace %s of deleted pod %s is still there", ns, pod)
	}
	link := netns.HostIfName(labName, pod)
	if out, err := exec.Command("ip", "-n", lab.NodeNamespace(labName), "link", "show", link).CombinedOutput(); err == nil {
		t.Errorf("link %s of deleted pod %s is still in the node namespace:\n%s", link, pod, out)
	}
	dir := lab.PathsFor(lab.DefaultRunRoot, labName).PodDir(pod)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run directory %s of deleted pod %s is still there (stat: %v)", dir, pod, err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if cmd := string(b); strings.Contains(cmd, dir+"/") { // the agent's, proxy's, app's and pod init's arguments name it
			t.Errorf("process of deleted pod %s is still running: %s: %q", pod, p, strings.ReplaceAll(cmd, "\x00", " "))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := meshlab(t, "proxy-status", "--name", labName)
		if err != nil {
			t.Fatalf("proxy-status: %v\n%s", err, out)
		}
		if !strings.Contains(out, pod) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("proxy-status still lists deleted pod %s:\n%s", pod, out)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, labName))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Pods {
		if p.Name == pod {
			t.Errorf("lab.json still lists deleted pod %s", pod)
		}
	}
}

// liveChanges changes greeter-v1 beyond its labels (its app now waits for its proxy: a
// new pod), adds a Workload whose proxy cannot start, and a Deployment whose pods have no
// sidecar (they resolve Services through the lab's cluster DNS).
const liveChanges = `apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata:
  name: greeter-v1
spec:
  labels: {app: greeter, version: v1}
  serviceAccount: greeter
  ports: [8080]
  sidecar: {holdApplicationUntilProxyStarts: true}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: broken}
spec:
  labels: {app: broken}
  ports: [8080]
  sidecar: {proxyPath: /nonexistent/envoy}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: legacy
spec:
  selector:
    matchLabels: {app: legacy}
  template:
    metadata:
      labels: {app: legacy, sidecar.istio.io/inject: "false"}
    spec:
      containers:
      - name: curl
        image: curlimages/curl
        command: ["/bin/sleep", "infinity"]
`

// TestLivePodsReplaceFailAndPlain: a pod changed beyond its labels is replaced under its
// name and address (new processes); a pod whose proxy cannot start is reported FAILED by
// apply without harming the lab; a pod without a sidecar gets cluster DNS; deleting the
// last two leaves nothing of them, and down leaves nothing at all.
func TestLivePodsReplaceFailAndPlain(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/live-pods-base.yaml", "--timeout", "10s")
	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	defer c.Close()
	pods, err := c.Pods(t.Context())
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods at up: %+v, %v", pods, err)
	}
	greeterIP := pods[0].IP
	agentBefore := agentPID(t, l.name, "greeter-v1")

	file := filepath.Join(t.TempDir(), "changes.yaml")
	if err := os.WriteFile(file, []byte(liveChanges), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := meshlab(t, "apply", "--name", l.name, "-f", file)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	for _, want := range []string{
		"workload.meshlab.dev/greeter-v1 configured\n",
		"pod default/greeter-v1 deleted\n",
		"pod default/greeter-v1 created\n",
		"pod default/broken FAILED: proxy cannot be started",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply:\n%s\nwant a line %q", out, want)
		}
	}
	legacy := regexp.MustCompile(`(?m)^pod default/(legacy-[a-z0-9]+-[a-z0-9]{5}) created$`).FindStringSubmatch(out)
	if legacy == nil {
		t.Fatalf("apply:\n%s\nwant the legacy Deployment's pod created", out)
	}
	if agentAfter := agentPID(t, l.name, "greeter-v1"); agentAfter == 0 || agentAfter == agentBefore {
		t.Errorf("greeter-v1's agent: pid %d before, %d after; want a new process (the pod replaced)", agentBefore, agentAfter)
	}
	pods, err = c.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		switch {
		case p.Name == "greeter-v1" && (p.IP != greeterIP || !p.Ready):
			t.Errorf("replaced greeter-v1: %+v; want ready at its address %s", p, greeterIP)
		case p.Name == "broken" && p.Ready:
			t.Errorf("broken: %+v; want not ready", p)
		case p.Name == legacy[1] && p.Sidecar:
			t.Errorf("%s: %+v; want no sidecar", p.Name, p)
		}
	}
	out, err = meshlab(t, "exec", "--name", l.name, "deploy/legacy", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "http://greeter:8080/")
	if err != nil || out != "200" {
		t.Errorf("curl greeter from the pod without a sidecar: %v %q; want 200 through the cluster DNS and kube-proxy", err, out)
	}
	if out, err := meshlab(t, "describe", "--name", l.name, "pod", "broken"); err != nil || !strings.Contains(out, "/nonexistent/envoy") {
		t.Errorf("describe pod broken: %v\n%s\nwant the reason", err, out)
	}

	out, err = meshlab(t, "delete", "--name", l.name, "-f", file)
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	for _, pod := range []string{"broken", legacy[1], "greeter-v1"} {
		if !strings.Contains(out, "pod default/"+pod+" deleted\n") {
			t.Errorf("delete:\n%s\nwant pod %s deleted", out, pod)
		}
		checkPodGone(t, l.name, pod)
	}
	if out, err := meshlab(t, "down", "--name", l.name); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	assertNothingLeft(t, l.name)
}

// agentPID is the pid of the agent of pod in lab labName, 0 when none runs.
func agentPID(t *testing.T, labName, pod string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if cmd := string(b); strings.Contains(cmd, "\x00agent\x00") && strings.Contains(cmd, "--lab="+labName+"\x00") && strings.Contains(cmd, "--pod="+pod+"\x00") {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			return pid
		}
	}
	return 0
}
