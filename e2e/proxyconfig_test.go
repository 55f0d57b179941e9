package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
)

// reviewsRouting is the bookinfo lab's step 3 answer with outlier detection added: the
// dumps dataplane/proxyconfig's golden tests and fidelity/istioctl_test.go read were
// taken from a lab in this state.
const reviewsRouting = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec:
  host: reviews
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 30s}
  subsets:
    - {name: v1, labels: {version: v1}}
    - {name: v2, labels: {version: v2}}
    - {name: v3, labels: {version: v3}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
    - match: [{headers: {end-user: {exact: jason}}}]
      route: [{destination: {host: reviews, subset: v2}}]
    - route: [{destination: {host: reviews, subset: v3}}]
`

// TestProxyConfigLive reads a running bookinfo lab's sidecar with proxy-config, get pods
// and version as a user would, then stops it with down and reads its progress.
func TestProxyConfigLive(t *testing.T) {
	testutil.RequireRoot(t)
	l := startLab(t, filepath.Join("..", "scenarios", "labs", "bookinfo.yaml"))
	pc := func(args ...string) string {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	rows := func(out string) []string {
		var r []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			r = append(r, strings.Join(strings.Fields(line), " "))
		}
		return r
	}
	f := filepath.Join(t.TempDir(), "reviews.yaml")
	if err := os.WriteFile(f, []byte(reviewsRouting), 0o644); err != nil {
		t.Fatal(err)
	}
	pc("apply", "-f", f)

	// The subset clusters, with the DestinationRule that made them, once pushed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := rows(pc("proxy-config", "clusters", "deploy/productpage-v1", "--fqdn", "reviews", "--subset", "v2"))
		if len(got) == 1 && got[0] == "reviews.default.svc.cluster.local 9080 v2 outbound EDS reviews.default" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("clusters --fqdn reviews --subset v2 = %q", got)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// --name is istioctl's route filter: only route 9080, reviews' vhost naming its
	// VirtualService (once per route of the VirtualService: the header match and the rest).
	routes := rows(pc("proxy-config", "routes", "deploy/productpage-v1", "--name", "9080"))
	vs := 0
	for _, r := range routes {
		if !strings.HasPrefix(r, "9080 ") {
			t.Errorf("routes --name 9080 shows %q", r)
		}
		if strings.HasPrefix(r, "9080 reviews.default.svc.cluster.local:9080 ") && strings.HasSuffix(r, " /* reviews.default") {
			vs++
		}
	}
	if vs != 2 {
		t.Errorf("routes --name 9080: %d rows of reviews name reviews.default, want 2:\n%s", vs, strings.Join(routes, "\n"))
	}

	// Endpoints come from the proxy's /clusters: the v2 subset holds reviews-v2's pod,
	// healthy and not ejected.
	var pods struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				PodIP string `json:"podIP"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(pc("get", "pods", "-o", "json")), &pods); err != nil || pods.Kind != "List" || len(pods.Items) != 6 {
		t.Fatalf("get pods -o json: %v (kind %q, %d pods), want kubectl's List of 6", err, pods.Kind, len(pods.Items))
	}
	// The sample's Deployments name their pods <deployment>-<hash>-<suffix>.
	ip, productpage := "", ""
	for _, p := range pods.Items {
		switch {
		case strings.HasPrefix(p.Metadata.Name, "reviews-v2-"):
			ip = p.Status.PodIP
		case strings.HasPrefix(p.Metadata.Name, "productpage-v1-"):
			productpage = p.Metadata.Name
		}
	}
	eps := rows(pc("proxy-config", "endpoints", "deploy/productpage-v1", "--cluster", "outbound|9080|v2|reviews.default.svc.cluster.local"))
	if want := ip + ":9080 HEALTHY OK outbound|9080|v2|reviews.default.svc.cluster.local"; len(eps) != 1 || eps[0] != want {
		t.Errorf("endpoints --cluster ...v2... = %q, want %q", eps, want)
	}

	secrets := rows(pc("proxy-config", "secret", "deploy/productpage-v1"))
	if len(secrets) != 2 || !strings.HasPrefix(secrets[0], "ROOTCA CA ACTIVE true ") || !strings.HasPrefix(secrets[1], "default Cert Chain ACTIVE true ") {
		t.Errorf("secret = %q", secrets)
	}

	// The table read from the pod is the table read from the same proxy's dump in a file
	// (the path istioctl's --file takes).
	dump := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(dump, agentGet(t, "/run/meshlab/"+l.name+"/pods/"+productpage+"/agent.sock", "/admin/config_dump?include_eds"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fromPod, fromFile := pc("pc", "listeners", "deploy/productpage-v1"), pc("pc", "listeners", "-f", dump); fromPod != fromFile {
		t.Errorf("listeners from the pod:\n%s\nfrom its dump:\n%s", fromPod, fromFile)
	}

	v := pc("version")
	if !strings.Contains(v, "\ncontrol plane version: 1.0.0-dev\n") || !strings.Contains(v, "data plane version: meshlab/1.0.0-dev/Clean/RELEASE/Go (6 proxies)") {
		t.Errorf("version:\n%s", v)
	}

	down := pc("down")
	lines := strings.Split(strings.TrimSpace(down), "\n")
	if !strings.HasPrefix(lines[0], "stopping lab "+l.name+": ") || !strings.HasPrefix(lines[len(lines)-1], "lab "+l.name+" is down (") {
		t.Errorf("down printed:\n%s", down)
	}
	select {
	case <-l.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("meshlab up did not exit after down")
	}
	upOut := strings.TrimSpace(l.out.String())
	if !strings.HasPrefix(upOut[strings.LastIndex(upOut, "\n")+1:], "lab "+l.name+" is down (") {
		t.Errorf("meshlab up's last line is not its final line:\n%s", upOut)
	}
	assertNothingLeft(t, l.name)
}

// agentGet GETs path from the agent serving on the unix socket sock.
func agentGet(t *testing.T, sock, path string) []byte {
	t.Helper()
	c := agentapi.NewClient(sock)
	defer c.Close()
	b, err := c.AdminBytes(t.Context(), strings.TrimPrefix(path, agentapi.PathAdmin))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
