package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// tdCheck is the trust domain migration page's request from sleep in ns to httpbin in
// default, printing the status code.
func tdCheck(ns string) string {
	get := `kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name}`
	nsFlag := ""
	if ns != "default" {
		get = `kubectl -n ` + ns + ` get pod -l app=sleep -o jsonpath={.items..metadata.name}`
		nsFlag = " -n " + ns
	}
	return `kubectl exec "$(` + get + `)" -c sleep` + nsFlag + ` -- curl http://httpbin.default:8000/ip -sS -o /dev/null -w "%{http_code}\n"`
}

// TestTrustDomainMigrationTask walks "Authorization Policy Trust Domain Migration"
// (tasks/security/authorization/authz-td-migration) as its snips.sh writes it: Istio
// installed with meshConfig.trustDomain=old-td (the reader answers istioctl's y/N with
// y), httpbin and sleep in default, sleep in sleep-allow, a policy allowing GETs to
// httpbin from old-td/ns/sleep-allow/sa/sleep only: sleep in default gets 403, sleep in
// sleep-allow 200. Installed again with new-td, istiod restarted (`rollout restart`), the
// pods deleted (their Deployments make new ones, whose certificates say new-td): both
// 403. Installed from the page's td-installation.yaml (new-td, alias old-td), the
// policy unchanged: 403 and 200 again, istiod rewriting the policy's old-td principal to
// new-td and old-td. Then the page's clean up.
func TestTrustDomainMigrationTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	walkTrustDomainMigration(t)
}

// TestTrustDomainMigrationTaskIstiod walks the same page with Istio's own istiod as the
// lab's control plane (up --control-plane=istiod): istiod rewrites the policy and names
// the SANs itself, from the mesh config the lab feeds it, restarted with each new trust
// domain (an install with a trust domain starts istiod with it) and by the page's
// rollout restart.
func TestTrustDomainMigrationTaskIstiod(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	walkTrustDomainMigration(t, "--control-plane=istiod", "--istiod-path", bin)
}

// walkTrustDomainMigration walks the page in a lab started with upArgs.
func walkTrustDomainMigration(t *testing.T, upArgs ...string) {
	t.Helper()
	// The page writes td-installation.yaml in its working directory: one of the test's
	// own, with samples/ linked to the module's (which stays unchanged).
	dir := t.TempDir()
	if err := os.Symlink(testutil.IstioSamples(t), filepath.Join(dir, "samples")); err != nil {
		t.Fatal(err)
	}
	p := &pageLab{docsLab: &docsLab{taskLab: startTaskLabFrom(t, "# a cluster before the task\n", upArgs...), t: t}, samples: dir}
	install := func(lines string) string {
		t.Helper()
		cmd := p.command(lines)
		cmd.Stdin = strings.NewReader("y\n") // the reader's answer to istioctl's y/N
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%v\n%s", lines, err, out)
		}
		return string(out)
	}
	const demoLines = "✔ Istio core installed ⛵️\n✔ Istiod installed 🧠\n✔ Egress gateways installed 🛫\n✔ Ingress gateways installed 🛬\n✔ Installation complete\nMade this installation the default for injection and validation.\n"
	if out := install(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=demo --set meshConfig.trustDomain=old-td`); !strings.HasSuffix(out, demoLines) {
		t.Errorf("install with trust domain old-td printed %q, want istioctl's demo lines", out)
	}
	p.sh(`kubectl label namespace default istio-injection=enabled
kubectl apply -f samples/httpbin/httpbin.yaml
kubectl apply -f samples/sleep/sleep.yaml
kubectl create namespace sleep-allow
kubectl label namespace sleep-allow istio-injection=enabled
kubectl apply -f samples/sleep/sleep.yaml -n sleep-allow`)
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: service-httpbin.default.svc.cluster.local
  namespace: default
spec:
  rules:
  - from:
    - source:
        principals:
        - old-td/ns/sleep-allow/sa/sleep
    to:
    - operation:
        methods:
        - GET
  selector:
    matchLabels:
      app: httpbin
---
EOF`); out != "authorizationpolicy.security.istio.io/service-httpbin.default.svc.cluster.local created\n" {
		t.Errorf("apply the policy: %q", out)
	}
	p.shows("403\n", tdCheck("default"))
	p.shows("200\n", tdCheck("sleep-allow"))
	p.step("old-td: sleep 403, sleep-allow's sleep 200")

	if out := install(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=demo --set meshConfig.trustDomain=new-td`); !strings.HasSuffix(out, demoLines) {
		t.Errorf("install with trust domain new-td printed %q", out)
	}
	if out := p.sh(`kubectl rollout restart deployment -n istio-system istiod`); out != "deployment.apps/istiod restarted\n" {
		t.Errorf("rollout restart printed %q, want kubectl's line", out)
	}
	before := p.sh(`kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name}`)
	p.sh(`kubectl delete pod --all`)
	p.sh(`kubectl delete pod --all -n sleep-allow`)
	p.shows("403\n", tdCheck("default"))
	p.shows("403\n", tdCheck("sleep-allow"))
	if after := p.sh(`kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name}`); after == before {
		t.Errorf("sleep's pod is still %q after delete pod --all, want a new pod as its ReplicaSet makes", after)
	}
	p.step("new-td without aliases: both 403")
	// The new pods' certificates name new-td (describe pod's Certificate line, which the
	// page does not run).
	if out := p.sh(`kubectl describe pod "$(kubectl -n sleep-allow get pod -l app=sleep -o jsonpath={.items..metadata.name})" -n sleep-allow`); !strings.Contains(out, "spiffe://new-td/ns/sleep-allow/sa/sleep") {
		t.Errorf("sleep-allow's sleep has no certificate for spiffe://new-td/ns/sleep-allow/sa/sleep:\n%s", out)
	}

	out := install(`cat <<EOF > ./td-installation.yaml
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    trustDomain: new-td
    trustDomainAliases:
      - old-td
EOF
istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=demo -f td-installation.yaml -y`)
	if out != demoLines {
		t.Errorf("install -f td-installation.yaml -y printed %q, want istioctl's demo lines", out)
	}
	p.shows("403\n", tdCheck("default"))
	p.shows("200\n", tdCheck("sleep-allow"))
	p.step("new-td with alias old-td: sleep 403, sleep-allow's sleep 200")
	// Not the page's: httpbin's sidecar counts the requests by the peers' new identities
	// (Istio's standard metrics, istioctl x es -oprom).
	p.until("httpbin's istio_requests_total naming spiffe://new-td/ns/sleep-allow/sa/sleep",
		func() string {
			out, _ := p.command(`istioctl x es "$(kubectl get pod -l app=httpbin -o jsonpath={.items..metadata.name})" -oprom`).CombinedOutput()
			return string(out)
		},
		func(out string) bool {
			return strings.Contains(out, `source_principal="spiffe://new-td/ns/sleep-allow/sa/sleep"`) && strings.Contains(out, `destination_principal="spiffe://new-td/ns/default/sa/httpbin"`)
		})

	// Not the page's: a workload's rollout restart replaces its pod, as kubectl's (a new
	// pod-template-hash, so a new name), and the new pod serves as the old one did. Under
	// istiod, sleep-allow's proxy may still be reconnecting to the istiod the install
	// restarted when httpbin rolls: a request sent to the old pod then waits out its
	// connect timeout, and its retry goes to the cluster CDS has given since (new SANs
	// for the alias, the new pod), as Envoy's router's does
	// (TestRetryTakesTheClusterCDSReplaced).
	restartHTTPBin(p)
	tdCleanUp(t, p)
}

// restartHTTPBin restarts httpbin's Deployment and checks its new pod serves as the old
// one did.
func restartHTTPBin(p *pageLab) {
	t := p.t
	pod := p.sh(`kubectl get pod -l app=httpbin -o jsonpath={.items..metadata.name}`)
	if out := p.sh(`kubectl rollout restart deployment httpbin`); out != "deployment.apps/httpbin restarted\n" {
		t.Errorf("rollout restart deployment httpbin printed %q", out)
	}
	p.until("a new httpbin pod", func() string { return p.sh(`kubectl get pod -l app=httpbin -o jsonpath={.items..metadata.name}`) },
		func(out string) bool { return out != pod && out != "" && !strings.Contains(out, " ") })
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := p.command(tdCheck("sleep-allow")).CombinedOutput()
		if string(out) == "200\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep-allow's sleep got %q from httpbin's new pod for 30 s, want 200\n%s", out, tdReplacedPodState(p))
		}
		time.Sleep(300 * time.Millisecond)
	}
	p.shows("403\n", tdCheck("default"))
}

// tdReplacedPodState is what a failing check after httpbin's rollout restart needs to
// say where its answer comes from: the pods, each proxy's connection and sync state (the
// lab's and istiod's), the client's endpoints for httpbin and curl's whole exchange (the
// proxy's response flags and body).
func tdReplacedPodState(p *pageLab) string {
	var b strings.Builder
	for _, lines := range []string{
		`kubectl get pods -A -o wide`,
		`istioctl proxy-status`,
		`istioctl proxy-status --istiod`,
		`istioctl proxy-config endpoints "$(kubectl -n sleep-allow get pod -l app=sleep -o jsonpath={.items..metadata.name})" -n sleep-allow --cluster "outbound|8000||httpbin.default.svc.cluster.local"`,
		`kubectl exec "$(kubectl -n sleep-allow get pod -l app=sleep -o jsonpath={.items..metadata.name})" -c sleep -n sleep-allow -- curl http://httpbin.default:8000/ip -sS -v`,
		// Both proxies' access logs (the demo profile's): each request's flags, upstream
		// host and duration say which side answered 503 and why.
		`kubectl logs -n sleep-allow -l app=sleep -c istio-proxy --tail=12`,
		`kubectl logs -l app=httpbin -c istio-proxy --tail=12`,
	} {
		out, err := p.command(lines).CombinedOutput()
		fmt.Fprintf(&b, "$ %s (%v)\n%s\n", lines, err, out)
	}
	return b.String()
}

// tdCleanUp runs the page's clean up, each command held to its exit status (set -e) and
// kubectl's lines for the objects and namespaces it deletes.
func tdCleanUp(t *testing.T, p *pageLab) {
	t.Helper()
	out := p.sh(`set -e
kubectl delete authorizationpolicy service-httpbin.default.svc.cluster.local
kubectl delete deploy httpbin; kubectl delete service httpbin; kubectl delete serviceaccount httpbin
kubectl delete deploy sleep; kubectl delete service sleep; kubectl delete serviceaccount sleep
istioctl uninstall --purge -y
kubectl delete namespace sleep-allow istio-system`)
	for _, want := range []string{
		`authorizationpolicy.security.istio.io "service-httpbin.default.svc.cluster.local" deleted`,
		`deployment.apps "httpbin" deleted`, `service "httpbin" deleted`, `serviceaccount "httpbin" deleted`,
		`deployment.apps "sleep" deleted`, `service "sleep" deleted`, `serviceaccount "sleep" deleted`,
		"✔ Uninstall complete",
		`namespace "sleep-allow" deleted`, `namespace "istio-system" deleted`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's clean up printed no %q:\n%s", want, out)
		}
	}
	p.sh(`rm ./td-installation.yaml`)
}

// TestTrustDomainAmbient: ambient follows the mesh's trust domain as istiod makes it
// follow: installed with meshConfig.trustDomain=new-td, ztunnel holds certificates for
// spiffe://new-td/... (WDS names the trust domain, the CA issues in it) and curl reaches
// httpbin over HBONE, both identities new-td in ztunnel's access log. Installed again
// with td3 and the pods deleted (their Deployments make new ones), the new pods'
// certificates say td3 and traffic still flows.
func TestTrustDomainAmbient(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, ambientClusterYAML)
	tl.run("install", "--set", "profile=ambient", "--set", "meshConfig.trustDomain=new-td", "-y")
	tl.run("apply", "-f", filepath.Join(samples, "httpbin/httpbin.yaml"))
	tl.run("apply", "-f", filepath.Join(samples, "curl/curl.yaml"))
	tl.run("label", "namespace", "default", "istio.io/dataplane-mode=ambient")
	curl := []string{"exec", "deploy/curl", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}\n", "http://httpbin:8000/ip"}
	leaves := func(td string) func(string) bool {
		return func(out string) bool {
			return strings.Contains(out, "spiffe://"+td+"/ns/default/sa/curl ") && strings.Contains(out, "spiffe://"+td+"/ns/default/sa/httpbin ") &&
				!strings.Contains(out, "spiffe://cluster.local/ns/default/sa/httpbin ")
		}
	}
	tl.poll("200", func(out string) bool { return out == "200\n" }, curl...)
	tl.poll("ztunnel's certificates for new-td", leaves("new-td"), "ztunnel-config", "certificates")
	tl.poll("an inbound HBONE connection between new-td identities", func(out string) bool {
		return strings.Contains(out, `src.identity="spiffe://new-td/ns/default/sa/curl"`) && strings.Contains(out, `dst.identity="spiffe://new-td/ns/default/sa/httpbin"`)
	}, "logs", "-n", "istio-system", "-l", "app=ztunnel", "--tail=-1")
	tl.step("new-td: ztunnel's certificates and HBONE identities in new-td")

	tl.run("install", "--set", "profile=ambient", "--set", "meshConfig.trustDomain=td3", "-y")
	if out := tl.run("rollout", "restart", "deployment", "-n", "istio-system", "istiod"); out != "deployment.apps/istiod restarted\n" {
		t.Errorf("rollout restart printed %q", out)
	}
	tl.run("delete", "pod", "--all")
	tl.poll("ztunnel's certificates for td3", func(out string) bool {
		return strings.Contains(out, "spiffe://td3/ns/default/sa/curl ") && strings.Contains(out, "spiffe://td3/ns/default/sa/httpbin ")
	}, "ztunnel-config", "certificates")
	tl.poll("200", func(out string) bool { return out == "200\n" }, curl...)
	tl.step("td3 after the pods were replaced: certificates in td3, traffic flows")
}
