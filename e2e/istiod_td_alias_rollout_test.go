package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestIstiodTrustDomainAliasThenRolloutRestart installs a new trust domain alias (istiod
// restarts with it, and every sidecar's clusters get the alias's SANs) and at once rolls
// httpbin out, three times: sleep in sleep-allow, whose proxy is still reconnecting to
// the new istiod when its old endpoint's pod goes, must reach the new pod within 30 s.
// Its request to the old pod waits out the connect timeout (10 s) and is retried on the
// cluster CDS replaced meanwhile, as Envoy's router retries, reaching the new pod. When
// retries stayed on the replaced cluster, all three tries went to the deleted pod: 503
// after 30 s, the trust domain page's CI failure.
func TestIstiodTrustDomainAliasThenRolloutRestart(t *testing.T) {
	p := startIstiodSleepAllowLab(t)
	for i := range 3 {
		pod := p.sh(`kubectl get pod -l app=httpbin -o jsonpath={.items..metadata.name}`)
		alias := "alias-" + string(rune('a'+i))
		// restartedAt has kubectl's one-second resolution: the previous round's rollout
		// may be in this second.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		if out := p.sh(`istioctl install --set profile=demo --set meshConfig.trustDomainAliases[0]=` + alias + ` -y && kubectl rollout restart deployment httpbin`); !strings.HasSuffix(out, "deployment.apps/httpbin restarted\n") {
			t.Fatalf("round %d: install and rollout restart printed %q", i+1, out)
		}
		waitNewHttpbinPod(p, pod)
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, _ := p.command(tdCheck("sleep-allow")).CombinedOutput()
			if string(out) == "200\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d (alias %s): sleep-allow's sleep got %q from httpbin's new pod for 30 s, want 200\n%s", i+1, alias, out, tdReplacedPodState(p))
			}
			time.Sleep(300 * time.Millisecond)
		}
		p.step("alias " + alias + " installed, httpbin rolled: sleep-allow reaches the new pod")
	}
}
