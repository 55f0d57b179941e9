package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsEgressKubernetesServicesTask walks "Kubernetes Services for Egress Traffic"
// (tasks/traffic-management/egress/egress-kubernetes-services) as its snips.sh writes
// it, httpbin.org and Wikipedia being the lab's outside world: Istio's demo profile,
// sleep in default (sidecar) and in without-istio (none: `get pod` shows 1/1). The
// ExternalName Service my-httpbin (httpbin.org): `get svc` prints kubectl's row
// (ExternalName, <none>, httpbin.org, 80/TCP); sleep without Istio gets httpbin.org's
// /headers under the alias's Host; with the page's DestinationRule (tls DISABLE) the
// sidecar's sleep gets them through its proxy, which names the alias's route
// (X-Envoy-Decorator-Operation my-httpbin.default.svc.cluster.local:80/*, as the page's
// test checks). The second half, a Service without a selector and an Endpoints object of
// Wikipedia's public addresses, is refused by name: a lab reaches nothing beyond its
// world, and meshlab has no manually managed Endpoints (refusals held below). Then the
// page's cleanup.
func TestDocsEgressKubernetesServicesTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`istioctl install --set profile=demo -y
kubectl label namespace default istio-injection=enabled --overwrite
kubectl apply -f samples/sleep/sleep.yaml`)
	if out := p.sh(`kubectl create namespace without-istio`); out != "namespace/without-istio created\n" {
		t.Errorf("create namespace printed %q", out)
	}
	p.sh(`kubectl apply -f samples/sleep/sleep.yaml -n without-istio`)
	const sources = `export SOURCE_POD=$(kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name})
export SOURCE_POD_WITHOUT_ISTIO="$(kubectl get pod -n without-istio -l app=sleep -o jsonpath={.items..metadata.name})"
`
	p.until("sleep's pods in default and without-istio", func() string {
		return p.sh(sources + `echo "$SOURCE_POD $SOURCE_POD_WITHOUT_ISTIO"`)
	}, func(s string) bool { return regexp.MustCompile(`^sleep-\S+ sleep-\S+\n$`).MatchString(s) })
	// The page's `get pod`: kubectl's columns, the pod 1/1 (no sidecar).
	p.until("get pod $SOURCE_POD_WITHOUT_ISTIO as the page prints it", func() string {
		return p.sh(sources + `kubectl get pod "$SOURCE_POD_WITHOUT_ISTIO" -n without-istio`)
	}, regexp.MustCompile(`^NAME +READY +STATUS +RESTARTS +AGE\nsleep-\S+ +1/1 +Running +0 +\S+\n$`).MatchString)

	if out := p.sh(`kubectl apply -f - <<EOF
kind: Service
apiVersion: v1
metadata:
  name: my-httpbin
spec:
  type: ExternalName
  externalName: httpbin.org
  ports:
  - name: http
    protocol: TCP
    port: 80
EOF`); out != "service/my-httpbin created\n" {
		t.Errorf("apply my-httpbin printed %q", out)
	}
	if out := p.sh(`kubectl get svc my-httpbin`); !regexp.MustCompile(`^NAME +TYPE +CLUSTER-IP +EXTERNAL-IP +PORT\(S\) +AGE\nmy-httpbin +ExternalName +<none> +httpbin\.org +80/TCP +\S+\n$`).MatchString(out) {
		t.Errorf("get svc my-httpbin:\n%s\nwant the page's row: my-httpbin   ExternalName   <none>   httpbin.org   80/TCP", out)
	}
	p.until("httpbin.org's /headers through the alias, from sleep without Istio", func() string {
		out, _ := p.command(sources + `kubectl exec "$SOURCE_POD_WITHOUT_ISTIO" -n without-istio -c sleep -- curl -sS my-httpbin.default.svc.cluster.local/headers`).CombinedOutput()
		return string(out)
	}, func(out string) bool {
		return strings.Contains(out, `"Host": "my-httpbin.default.svc.cluster.local"`) && !strings.Contains(out, "X-Envoy")
	})
	p.step("without Istio: httpbin.org through the ExternalName alias")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: my-httpbin
spec:
  host: my-httpbin.default.svc.cluster.local
  trafficPolicy:
    tls:
      mode: DISABLE
EOF`); out != "destinationrule.networking.istio.io/my-httpbin created\n" {
		t.Errorf("apply the DestinationRule printed %q", out)
	}
	p.until("httpbin.org's /headers through the sidecar, naming the alias's route", func() string {
		out, _ := p.command(sources + `kubectl exec "$SOURCE_POD" -c sleep -- curl -sS my-httpbin.default.svc.cluster.local/headers`).CombinedOutput()
		return string(out)
	}, func(out string) bool {
		return strings.Contains(out, `"Host": "my-httpbin.default.svc.cluster.local"`) &&
			strings.Contains(out, `"X-Envoy-Peer-Metadata-Id": "sidecar~`)
	})
	// The page's test checks X-Envoy-Decorator-Operation, which Envoy sends upstream
	// when it traces (Istio's default Zipkin tracing, with the page's X-B3-* headers);
	// meshlab's sidecar does not send it upstream: the route's decorator holds the
	// operation it would name.
	if out := p.sh(sources + `istioctl proxy-config routes "$SOURCE_POD" --name 80 -o json`); !strings.Contains(out, `"operation": "my-httpbin.default.svc.cluster.local:80/*"`) {
		t.Errorf("the sidecar's route 80 has no decorator my-httpbin.default.svc.cluster.local:80/*:\n%s", out)
	}
	p.step("with Istio: httpbin.org through the sidecar's route for the alias")
	out := p.sh(`set -e
kubectl delete destinationrule my-httpbin
kubectl delete service my-httpbin`)
	for _, want := range []string{`destinationrule.networking.istio.io "my-httpbin" deleted`, `service "my-httpbin" deleted`} {
		if !strings.Contains(out, want) {
			t.Errorf("the ExternalName cleanup printed no %q:\n%s", want, out)
		}
	}

	// The page's second half: a Service without a selector, whose Endpoints name
	// Wikipedia's public addresses. A lab reaches nothing beyond its own outside world and
	// derives every Service's endpoints from its pods, so the Service is refused by name
	// with what to do instead, and nothing is made.
	svc, err := p.command(`kubectl apply -f - <<EOF
kind: Service
apiVersion: v1
metadata:
  name: my-wikipedia
spec:
  ports:
  - protocol: TCP
    port: 443
    name: tls
EOF`).CombinedOutput()
	if err == nil || !strings.Contains(string(svc), "Service default/my-wikipedia: spec.selector: is required (meshlab has no manually managed Endpoints: a lab's Service selects its pods; for addresses outside them use a ServiceEntry") {
		t.Errorf("apply my-wikipedia without a selector: err %v\n%s\nwant the refusal naming spec.selector and the ServiceEntry to use instead", err, svc)
	}
	if out, err := p.command(`kubectl get svc my-wikipedia`).CombinedOutput(); err == nil {
		t.Errorf("get svc my-wikipedia after the refusal:\n%s\nwant NotFound (nothing made)", out)
	}
	// The page's Endpoints (Wikipedia's public addresses): a lab derives endpoints from
	// its pods, so it keeps none and says why.
	if out := p.sh(`kubectl apply -f - <<EOF
kind: Endpoints
apiVersion: v1
metadata:
  name: my-wikipedia
subsets:
  - addresses:
      - ip: 198.35.26.96
      - ip: 208.80.153.224
    ports:
      - port: 443
        name: tls
EOF`); !strings.Contains(out, "Warning: endpoints/my-wikipedia is not kept by the lab: the lab derives endpoints from its pods and Services") {
		t.Errorf("apply the page's Endpoints printed:\n%s\nwant the warning saying the lab keeps none", out)
	}
	p.step("my-wikipedia without a selector refused by name, its Endpoints not kept")
	// What the refusal says to do instead: Wikipedia's site by DNS in the outside world,
	// through the sidecar, as the page's --resolve curl would reach it.
	p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: my-wikipedia
spec:
  hosts:
  - en.wikipedia.org
  ports:
  - number: 443
    name: tls
    protocol: TLS
  resolution: DNS
EOF`)
	p.until("Wikipedia's title through the ServiceEntry the refusal names", func() string {
		out, _ := p.command(sources + `kubectl exec "$SOURCE_POD" -c sleep -- curl -sS https://en.wikipedia.org/wiki/Main_Page | grep -o "<title>.*</title>"`).Output()
		return string(out)
	}, func(out string) bool { return out == "<title>Wikipedia, the free encyclopedia</title>\n" })
	p.sh(`kubectl delete serviceentry my-wikipedia`)

	out = p.sh(`set -e
kubectl delete -f samples/sleep/sleep.yaml
kubectl delete -f samples/sleep/sleep.yaml -n without-istio
kubectl delete namespace without-istio`)
	for _, want := range []string{`deployment.apps "sleep" deleted`, `namespace "without-istio" deleted`} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's cleanup printed no %q:\n%s", want, out)
		}
	}
}
