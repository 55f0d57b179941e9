package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsLinesAsWritten runs docs lines that parsed but had never been run (the command
// check in cmd/meshlab/testdata/docs_commands.txt proves only that they parse), as the
// pages write them: ambient deploy-sample-app's `apply -f
// https://raw.githubusercontent.com/istio/istio/release-1.24/samples/...` (the lab's
// outside world answers from the Istio module: nothing leaves the machine) and its
// `annotate gateway ... networking.istio.io/service-type=ClusterIP` (the gateway's
// Service becomes ClusterIP); secure-and-visualize's `istioctl dashboard kiali` without
// the addon (istioctl's error) and with samples/addons/kiali.yaml (istioctl's URL,
// forwarded to the addon's pod); the waypoint page's `label pod -l
// version=v2,app=reviews ...` (kubectl's pod/NAME labeled).
func TestDocsLinesAsWritten(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	out := p.sh(`kubectl apply -f https://raw.githubusercontent.com/istio/istio/release-1.24/samples/bookinfo/platform/kube/bookinfo.yaml
kubectl apply -f https://raw.githubusercontent.com/istio/istio/release-1.24/samples/bookinfo/platform/kube/bookinfo-versions.yaml
kubectl apply -f https://raw.githubusercontent.com/istio/istio/release-1.24/samples/bookinfo/gateway-api/bookinfo-gateway.yaml`)
	for _, want := range []string{"service/details created\n", "deployment.apps/reviews-v3 created\n", "service/reviews-v1 created\n",
		"gateway.gateway.networking.k8s.io/bookinfo-gateway created\n", "httproute.gateway.networking.k8s.io/bookinfo created\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply -f https://raw.githubusercontent.com/...: no %q in\n%s", want, out)
		}
	}
	p.shows("gateway.gateway.networking.k8s.io/bookinfo-gateway annotated\n",
		`kubectl annotate gateway bookinfo-gateway networking.istio.io/service-type=ClusterIP --namespace=default`)
	p.until("the page's get gateway (PROGRAMMED True)", func() string { return p.sh(`kubectl get gateway`) }, regexp.MustCompile(
		`^NAME\s+CLASS\s+ADDRESS\s+PROGRAMMED\s+AGE\nbookinfo-gateway\s+istio\s+bookinfo-gateway-istio\.default\.svc\.cluster\.local\s+True\s+\S+\n$`).MatchString)
	if svc := p.sh(`kubectl get svc bookinfo-gateway-istio -o jsonpath={.spec.type}`); svc != "ClusterIP" {
		t.Errorf("the annotated gateway's Service is %q, want ClusterIP", svc)
	}
	p.step("bookinfo from raw.githubusercontent.com, gateway annotated")

	if out, err := p.command(`istioctl dashboard kiali`).CombinedOutput(); err == nil || string(out) != "Error: no pods found with selector app=kiali\n" {
		t.Errorf("istioctl dashboard kiali without the addon: %v\n%s\nwant istioctl's error", err, out)
	}
	p.sh(`kubectl apply -f samples/addons/kiali.yaml`)
	p.kialiDashboard()

	if out, err := p.command(`kubectl label pod -l version=v2,app=reviews istio.io/use-waypoint=reviews-v2-pod-waypoint`).CombinedOutput(); err != nil ||
		!regexp.MustCompile(`^pod/reviews-v2-\S+ labeled\n$`).Match(out) {
		t.Errorf("label pod -l version=v2,app=reviews: %v\n%s\nwant the page's pod/reviews-v2-... labeled", err, out)
	}
}

// kialiDashboard runs `istioctl dashboard kiali` until it prints istioctl's URL line,
// gets the URL through it (the addon's pod answers), then stops it (Ctrl-C).
func (p *pageLab) kialiDashboard() {
	p.t.Helper()
	cmd := exec.Command(meshlabBin(p.t), "--lab", p.name, "dashboard", "kiali")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !regexp.MustCompile(`^http://localhost:\d+/kiali\n$`).MatchString(line) {
		p.t.Fatalf("istioctl dashboard kiali printed %q (%v); want istioctl's http://localhost:20001/kiali", line, err)
	}
	url := strings.TrimSpace(line)
	p.until("the kiali pod answering through the dashboard", func() string {
		resp, err := http.Get(url + "/api")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.Status + "\n" + string(body)
	}, func(s string) bool {
		return strings.HasPrefix(s, "200 OK\n") && strings.Contains(s, `"Kiali state":"running"`)
	})
	p.step("dashboard kiali: " + url)
}
