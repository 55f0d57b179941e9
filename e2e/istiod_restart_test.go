package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestIstiodRestartsThenRolloutRestart restarts istiod eight times (kubectl rollout
// restart -n istio-system istiod, as the trust domain migration page does), each time
// followed by a rollout restart of httpbin, and holds that sleep in another namespace
// reaches the new httpbin pod each time (200 within the pages' 30 s). Every istiod
// restart ends the proxies' xDS streams; a proxy that was answered starts its reconnect
// backoff again from 500 ms, as Envoy does. When the backoff grew with every restart
// instead, sleep's proxy stayed away for up to 30 s from the fifth or sixth restart on,
// with the old pod's endpoint: 503 for the whole wait (3 runs of 3 before the fix).
func TestIstiodRestartsThenRolloutRestart(t *testing.T) {
	p := startIstiodSleepAllowLab(t)
	for i := range 8 {
		if out := p.sh(`kubectl rollout restart deployment -n istio-system istiod`); out != "deployment.apps/istiod restarted\n" {
			t.Fatalf("restart %d of istiod printed %q", i+1, out)
		}
		pod := p.sh(`kubectl get pod -l app=httpbin -o jsonpath={.items..metadata.name}`)
		// restartedAt has kubectl's one-second resolution: the next second's restart.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		if out := p.sh(`kubectl rollout restart deployment httpbin`); out != "deployment.apps/httpbin restarted\n" {
			t.Fatalf("restart %d of httpbin printed %q", i+1, out)
		}
		waitNewHttpbinPod(p, pod)
		p.shows("200\n", tdCheck("sleep-allow"))
		p.step("istiod and httpbin restarted: sleep reaches the new pod")
	}
}

// startIstiodSleepAllowLab starts a lab on istiod's generator with the trust domain
// page's httpbin in default and sleep in sleep-allow, both injected, and waits for sleep
// to reach httpbin: the start of the istiod restart tests.
func startIstiodSleepAllowLab(t *testing.T) *pageLab {
	t.Helper()
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	dir := t.TempDir()
	if err := os.Symlink(testutil.IstioSamples(t), filepath.Join(dir, "samples")); err != nil {
		t.Fatal(err)
	}
	p := &pageLab{docsLab: &docsLab{taskLab: startTaskLabFrom(t, "# a cluster before the task\n", "--control-plane=istiod", "--istiod-path", bin), t: t}, samples: dir}
	p.sh(`kubectl label namespace default istio-injection=enabled
kubectl apply -f samples/httpbin/httpbin.yaml
kubectl create namespace sleep-allow
kubectl label namespace sleep-allow istio-injection=enabled
kubectl apply -f samples/sleep/sleep.yaml -n sleep-allow`)
	p.shows("200\n", tdCheck("sleep-allow"))
	return p
}

// waitNewHttpbinPod waits for httpbin's one pod to be another than pod (a rollout done).
func waitNewHttpbinPod(p *pageLab, pod string) {
	p.until("a new httpbin pod", func() string { return p.sh(`kubectl get pod -l app=httpbin -o jsonpath={.items..metadata.name}`) },
		func(out string) bool { return out != pod && out != "" && !strings.Contains(out, " ") })
}
