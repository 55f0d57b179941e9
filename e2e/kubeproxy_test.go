package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns/capture"
)

// TestKubeProxy proves the kube-proxy rules of the node namespace on a real lab: a pod with
// no sidecar reaches both backend pods through the backend Service's VIP, and a sidecar's
// own connection to the VIP (a DNS ServiceEntry whose endpoint names the backend Service,
// resolved by the sidecar's DNS proxy name table) is answered too; both go through the
// node's KUBE-SVC chain.
func TestKubeProxy(t *testing.T) {
	testutil.RequireRoot(t)
	// Not parallel (tparallel): its subtests share the test's lab and run one after another.
	l := startLab(t, "testdata/kubeproxy.yaml")
	vip := kubeProxyVIP(t, l.name, "backend")
	node := lab.NodeNamespace(l.name)

	t.Run("pod without sidecar reaches both endpoints by the VIP", func(t *testing.T) {
		before := kubeSvcPackets(t, node)
		seen := map[string]int{}
		// A fair coin misses one of two pods in 30 tries once in 2^29.
		for i := 0; i < 30 && len(seen) < 2; i++ {
			out, err := meshlab(t, "exec", "--name", l.name, "legacy", "--", "curl", "-sS", "-m", "5", "http://"+vip+":8080/")
			if err != nil {
				t.Fatalf("curl the VIP from legacy: %v\n%s", err, out)
			}
			pod := demoAnswer(t, out, "backend")
			seen[pod]++
		}
		if seen["backend-v1"] == 0 || seen["backend-v2"] == 0 {
			t.Fatalf("answers per pod %v, want both backend-v1 and backend-v2", seen)
		}
		if after := kubeSvcPackets(t, node); after <= before {
			t.Fatalf("KUBE-SERVICES -> KUBE-SVC packets %d -> %d: the connections did not go through kube-proxy's rules", before, after)
		}
	})

	t.Run("sidecar dials the VIP of a DNS ServiceEntry endpoint", func(t *testing.T) {
		se := `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend-alias}
spec:
  hosts: [backend.example.com]
  addresses: [240.240.0.2]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  location: MESH_INTERNAL
  resolution: DNS
  endpoints: [{address: backend.default.svc.cluster.local}]
`
		f := t.TempDir() + "/se.yaml"
		if err := os.WriteFile(f, []byte(se), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", f); err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
		before := kubeSvcPackets(t, node)
		var out string
		var err error
		// The sidecar gets the new cluster and the agent the new name table asynchronously.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			out, err = meshlab(t, "exec", "--name", l.name, "client", "--", "curl", "-sS", "-m", "5", "http://backend.example.com:8080/")
			if err == nil && strings.Contains(out, `"service":"backend"`) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("curl backend.example.com from a meshed pod: %v\n%s", err, out)
		}
		demoAnswer(t, out, "backend")
		if after := kubeSvcPackets(t, node); after <= before {
			t.Fatalf("KUBE-SVC packets %d -> %d: the sidecar's connection did not go through kube-proxy's rules", before, after)
		}
	})
}

// demoAnswer checks that out is the demo app's answer from service svc and returns the pod.
func demoAnswer(t *testing.T, out, svc string) string {
	t.Helper()
	var a struct{ Service, Pod string }
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.Service != svc {
		t.Fatalf("answer %q (%v), want the demo app of service %s", out, err, svc)
	}
	return a.Pod
}

// kubeSvcPacketsRe matches the counters of KUBE-SERVICES' jumps to a KUBE-SVC chain in
// `iptables-save -c` output.
var kubeSvcPacketsRe = regexp.MustCompile(`(?m)^\[(\d+):\d+\] -A KUBE-SERVICES .*-j KUBE-SVC-`)

// kubeSvcPackets returns how many packets the node's KUBE-SERVICES sent to service chains.
func kubeSvcPackets(t *testing.T, node string) int {
	t.Helper()
	out, err := capture.Save(node)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range kubeSvcPacketsRe.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// kubeProxyVIP reads a service's VIP from the lab API's topology.
func kubeProxyVIP(t *testing.T, name, svc string) string {
	t.Helper()
	sock := lab.PathsFor(lab.DefaultRunRoot, name).APISocket()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://lab/v1/topology")
	if err != nil {
		t.Fatalf("GET /v1/topology: %v", err)
	}
	defer resp.Body.Close()
	var topo api.Topology
	if err := json.NewDecoder(resp.Body).Decode(&topo); err != nil {
		t.Fatalf("decode topology: %v", err)
	}
	for _, s := range topo.Services {
		if s.Name == svc {
			return s.VIP.String()
		}
	}
	t.Fatalf("no service %s in the topology %+v", svc, topo.Services)
	return ""
}
