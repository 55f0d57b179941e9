package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestProxylessGRPCLab runs Istio's proxyless gRPC in a real lab: Deployments injected
// with the grpc-agent template running Istio's echo app (the grpc-echo persona), no
// sidecar and no capture, each app with its agent's bootstrap (GRPC_XDS_BOOTSTRAP), its
// certificate files and the agent's XDS socket, and nothing else of the run root. The
// client, run with `meshlab exec deploy/grpc-client -- meshlab app grpc-call`, reaches
// both servers through xds:///, a VirtualService's 80/20 split is honoured, and under
// STRICT with ISTIO_MUTUAL the servers see the client's SPIFFE ID while a plaintext
// client is refused. `describe pod` shows the agent's relay; nothing is left after down.
func TestProxylessGRPCLab(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/grpc-lab.yaml")
	bin := meshlabBin(t)
	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	defer c.Close()
	pods, err := c.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byPrefix := map[string]api.PodStatus{}
	for _, p := range pods {
		if !p.Ready {
			t.Errorf("pod %s not ready: %s", p.Name, p.Message)
		}
		byPrefix[p.Name[:strings.Index(p.Name, "-")+3]] = p // "echo-v1", "echo-v2", "grpc-cl"
	}
	echo1, ok := byPrefix["echo-v1"]
	if !ok || len(pods) != 3 {
		t.Fatalf("pods %+v, want echo-v1, echo-v2 and grpc-client", pods)
	}

	const target = "xds:///echo.default.svc.cluster.local:7070"
	// call runs the client n times and counts answers by "pod peer".
	call := func(what string, n string, extra ...string) (map[string]int, string, error) {
		t.Helper()
		args := append([]string{"exec", "--name", l.name, "deploy/grpc-client", "--", bin, "app", "grpc-call", "--timeout", "20s", "-n", n}, extra...)
		out, err := meshlab(t, args...)
		got := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^code=OK pod=(\S+)-[a-z0-9]+-[a-z0-9]{5} peer=(\S+)$`).FindAllStringSubmatch(out, -1) {
			got[m[1]+" "+m[2]]++
		}
		t.Logf("%s: %v", what, got)
		return got, out, err
	}
	eventually := func(what, n string, ok func(map[string]int) bool) map[string]int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, out, err := call(what, n, target)
			if (err == nil && ok(got)) || time.Now().After(deadline) {
				if err != nil {
					t.Errorf("%s: %v\n%s", what, err, out)
				}
				return got
			}
			time.Sleep(300 * time.Millisecond)
		}
	}

	// No sidecar, no capture: the pod's nat table has no ISTIO chains.
	out, err := meshlab(t, "exec", "--name", l.name, "--privileged", echo1.Name, "--", "iptables-save", "-t", "nat")
	if err != nil || strings.Contains(out, "ISTIO_") {
		t.Errorf("iptables-save in %s: %v\n%s\nwant no capture rules", echo1.Name, err, out)
	}
	// The app sees its bootstrap, certificate files and XDS socket, and no other pod's
	// files or the lab's sockets.
	runDir := lab.PathsFor(lab.DefaultRunRoot, l.name).Dir
	out, err = meshlab(t, "exec", "--name", l.name, "deploy/grpc-client", "--", "sh", "-c",
		`echo "boot=$GRPC_XDS_BOOTSTRAP"; test -S "$(dirname $GRPC_XDS_BOOTSTRAP)/XDS" && echo socket; cat $(dirname $GRPC_XDS_BOOTSTRAP)/../istio-data/key.pem >/dev/null && echo key; ls -A `+runDir+` `+runDir+`/pods`)
	if err != nil {
		t.Fatalf("exec in grpc-client: %v\n%s", err, out)
	}
	client := byPrefix["grpc-cl"].Name
	wantBoot := filepath.Join(runDir, "pods", client, "istio-xds", "grpc-bootstrap.json")
	for _, want := range []string{"boot=" + wantBoot, "socket", "key"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the client app's view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "xds.sock") || strings.Contains(out, echo1.Name) {
		t.Errorf("the client app sees the lab's sockets or another pod's files:\n%s", out)
	}
	if _, err := os.Stat(wantBoot); err != nil {
		t.Errorf("bootstrap on the host: %v", err)
	}

	// Both servers answer over plaintext (no PeerAuthentication: gRPC's PERMISSIVE).
	got := eventually("no routing rules", "40", func(got map[string]int) bool { return got["echo-v1 none"] > 0 && got["echo-v2 none"] > 0 })
	if got["echo-v1 none"] == 0 || got["echo-v2 none"] == 0 || len(got) != 2 {
		t.Errorf("no routing rules: answers %v, want both pods over plaintext", got)
	}

	// The VirtualService's 80/20 split.
	if out, err := meshlab(t, "apply", "--wait", "--timeout", "30s", "--name", l.name, "-f", "testdata/grpc-lab-split.yaml"); err != nil {
		t.Fatalf("apply split: %v\n%s", err, out)
	}
	got = eventually("80/20 split", "200", func(got map[string]int) bool {
		v1 := got["echo-v1 none"]
		return v1 >= 140 && v1 <= 185 && v1+got["echo-v2 none"] == 200
	})
	if v1 := got["echo-v1 none"]; v1 < 140 || v1 > 185 || v1+got["echo-v2 none"] != 200 {
		t.Errorf("80/20 split: answers %v, want about 160 from echo-v1 and 40 from echo-v2", got)
	}

	// STRICT with ISTIO_MUTUAL: the servers see the client's identity; plaintext is refused.
	if out, err := meshlab(t, "apply", "--wait", "--timeout", "30s", "--name", l.name, "-f", "testdata/grpc-lab-strict.yaml"); err != nil {
		t.Fatalf("apply strict: %v\n%s", err, out)
	}
	clientID := "spiffe://cluster.local/ns/default/sa/grpc-client"
	got = eventually("STRICT", "40", func(got map[string]int) bool {
		return got["echo-v1 "+clientID] > 0 && got["echo-v2 "+clientID] > 0 && got["echo-v1 none"]+got["echo-v2 none"] == 0
	})
	if got["echo-v1 "+clientID] == 0 || got["echo-v2 "+clientID] == 0 || got["echo-v1 none"]+got["echo-v2 none"] > 0 {
		t.Errorf("STRICT: answers %v, want both pods seeing %s and no plaintext answer", got, clientID)
	}
	_, out, err = call("plaintext under STRICT", "1", "--plaintext", echo1.IP.String()+":17070")
	if err == nil || !strings.Contains(out, "code=Unavailable") {
		t.Errorf("plaintext call under STRICT: %v\n%s\nwant it refused (Unavailable)", err, out)
	}

	// describe pod shows the proxyless agent and its relayed stream.
	out, err = meshlab(t, "describe", "pod", "--name", l.name, echo1.Name)
	if err != nil {
		t.Fatalf("describe pod: %v\n%s", err, out)
	}
	for _, want := range []string{"proxyless gRPC (grpc-agent template)", "GRPC_XDS_BOOTSTRAP", "XDS proxy:", "stream:", "sidecar~" + echo1.IP.String() + "~" + echo1.Name, "spiffe://cluster.local/ns/default/sa/echo"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe pod lacks %q:\n%s", want, out)
		}
	}

	if out, err := meshlab(t, "down", "--name", l.name); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	<-l.exited
	assertNothingLeft(t, l.name)
}
