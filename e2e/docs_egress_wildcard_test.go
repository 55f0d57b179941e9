package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// wikipediaTitles is the wildcard page's check: both sites' titles through the sleep
// sample's sidecar, the same command before and through the egress gateway.
const wikipediaTitles = `kubectl exec "$SOURCE_POD" -c sleep -- sh -c 'curl -s https://en.wikipedia.org/wiki/Main_Page | grep -o "<title>.*</title>"; curl -s https://de.wikipedia.org/wiki/Wikipedia:Hauptseite | grep -o "<title>.*</title>"'`

// wikipediaTitlesOut is what the page prints for wikipediaTitles.
const wikipediaTitlesOut = "<title>Wikipedia, the free encyclopedia</title>\n<title>Wikipedia – Die freie Enzyklopädie</title>\n"

// TestDocsWildcardEgressHostsTask walks "Egress using Wildcard Hosts"
// (tasks/traffic-management/egress/wildcard-egress-hosts) with Istio's APIs as its
// snips.sh writes it, Wikipedia's sites being the lab's outside world (one server per
// site, each serving every language by Host, certificates for *.wikipedia.org): Istio
// installed with REGISTRY_ONLY, the sleep sample, SOURCE_POD; first both titles fail
// (no ServiceEntry), then the page's *.wikipedia.org ServiceEntry lets the sidecar pass
// both sites' TLS by SNI (both titles); deleted, the sites fail again. Through the
// egress gateway: the page's Gateway (PASSTHROUGH on *.wikipedia.org), DestinationRule
// and VirtualService sending SNI *.wikipedia.org to the gateway and from it to
// www.wikipedia.org, with www.wikipedia.org's DNS ServiceEntry: both titles come back
// (www.wikipedia.org's server answering en's and de's requests), and the gateway's
// `pilot-agent request GET clusters` grepped as the page greps it shows
// outbound|443||www.wikipedia.org's endpoint with cx_total 2. Then the page's cleanup.
func TestDocsWildcardEgressHostsTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=demo --set meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY -y`)
	// kubectl's lines (meshlab adds one on stderr for the pod it made).
	if out := p.sh(`kubectl apply -f samples/sleep/sleep.yaml`); !strings.HasPrefix(out, "serviceaccount/sleep created\nservice/sleep created\ndeployment.apps/sleep created\n") {
		t.Errorf("apply sleep.yaml printed %q", out)
	}
	p.until("SOURCE_POD, sleep's one pod", func() string { return p.sh(`kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name}`) },
		func(s string) bool { return strings.HasPrefix(s, "sleep-") && !strings.Contains(s, " ") })
	const source = `export SOURCE_POD=$(kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name})` + "\n"

	// REGISTRY_ONLY without an entry: neither site answers, grep finds no title, and
	// exec says so as kubectl does (the sh's status is the last grep's).
	const noTitle = "command terminated with exit code 1\n"
	p.shows(noTitle, source+wikipediaTitles)
	p.step("REGISTRY_ONLY: no title without a ServiceEntry")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: wikipedia
spec:
  hosts:
  - "*.wikipedia.org"
  ports:
  - number: 443
    name: https
    protocol: HTTPS
EOF`); out != "serviceentry.networking.istio.io/wikipedia created\n" {
		t.Errorf("apply the wildcard ServiceEntry printed %q", out)
	}
	p.shows(wikipediaTitlesOut, source+wikipediaTitles)
	p.step("direct: both titles through the wildcard ServiceEntry")
	if out := p.sh(`kubectl delete serviceentry wikipedia`); out != "serviceentry.networking.istio.io \"wikipedia\" deleted\n" {
		t.Errorf("delete serviceentry wikipedia printed %q", out)
	}
	p.shows(noTitle, source+wikipediaTitles)

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: istio-egressgateway
spec:
  selector:
    istio: egressgateway
  servers:
  - port:
      number: 443
      name: https
      protocol: HTTPS
    hosts:
    - "*.wikipedia.org"
    tls:
      mode: PASSTHROUGH
---
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: egressgateway-for-wikipedia
spec:
  host: istio-egressgateway.istio-system.svc.cluster.local
  subsets:
    - name: wikipedia
---
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: direct-wikipedia-through-egress-gateway
spec:
  hosts:
  - "*.wikipedia.org"
  gateways:
  - mesh
  - istio-egressgateway
  tls:
  - match:
    - gateways:
      - mesh
      port: 443
      sniHosts:
      - "*.wikipedia.org"
    route:
    - destination:
        host: istio-egressgateway.istio-system.svc.cluster.local
        subset: wikipedia
        port:
          number: 443
      weight: 100
  - match:
    - gateways:
      - istio-egressgateway
      port: 443
      sniHosts:
      - "*.wikipedia.org"
    route:
    - destination:
        host: www.wikipedia.org
        port:
          number: 443
      weight: 100
EOF`); out != "gateway.networking.istio.io/istio-egressgateway created\ndestinationrule.networking.istio.io/egressgateway-for-wikipedia created\nvirtualservice.networking.istio.io/direct-wikipedia-through-egress-gateway created\n" {
		t.Errorf("apply the egress gateway's objects printed %q", out)
	}
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: www-wikipedia
spec:
  hosts:
  - www.wikipedia.org
  ports:
  - number: 443
    name: https
    protocol: HTTPS
  resolution: DNS
EOF`); out != "serviceentry.networking.istio.io/www-wikipedia created\n" {
		t.Errorf("apply www-wikipedia printed %q", out)
	}
	p.shows(wikipediaTitlesOut, source+wikipediaTitles)
	p.step("through the egress gateway: both titles")
	// The page's clusters line: www.wikipedia.org's endpoint (the world's address, where
	// the page shows the real site's) and the two connections the titles made, which
	// went through the gateway to www.wikipedia.org's server.
	clusters := `kubectl exec "$(kubectl get pod -l istio=egressgateway -n istio-system -o jsonpath='{.items[0].metadata.name}')" -c istio-proxy -n istio-system -- pilot-agent request GET clusters | grep '^outbound|443||www.wikipedia.org.*cx_total:'`
	if out := p.sh(clusters); !regexp.MustCompile(`^outbound\|443\|\|www\.wikipedia\.org::\d+\.\d+\.\d+\.\d+:443::cx_total::2\n$`).MatchString(out) {
		t.Errorf("the egress gateway's clusters, grepped as the page greps them:\n%s\nwant the page's outbound|443||www.wikipedia.org::ADDRESS:443::cx_total::2", out)
	}

	// The page's cleanup. With the Gateway API's kinds installed (a lab has them built
	// in), `gateway` names the Gateway API's Gateway, as kubectl resolves it in such a
	// cluster (see TestDocsIngressGatewaysTask): the page's `delete gateway
	// istio-egressgateway` finds nothing, and Istio's short name gw deletes Istio's.
	out := p.sh(`set -e
kubectl delete serviceentry www-wikipedia
! kubectl delete gateway istio-egressgateway
kubectl delete gw istio-egressgateway
kubectl delete virtualservice direct-wikipedia-through-egress-gateway
kubectl delete destinationrule egressgateway-for-wikipedia`)
	for _, want := range []string{
		`serviceentry.networking.istio.io "www-wikipedia" deleted`,
		`Error from server (NotFound): gateways.gateway.networking.k8s.io "istio-egressgateway" not found`,
		`gateway.networking.istio.io "istio-egressgateway" deleted`,
		`virtualservice.networking.istio.io "direct-wikipedia-through-egress-gateway" deleted`,
		`destinationrule.networking.istio.io "egressgateway-for-wikipedia" deleted`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's cleanup printed no %q:\n%s", want, out)
		}
	}
	out = p.sh(`set -e
kubectl delete -f samples/sleep/sleep.yaml
istioctl uninstall --purge -y`)
	for _, want := range []string{`deployment.apps "sleep" deleted`, "✔ Uninstall complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's cleanup printed no %q:\n%s", want, out)
		}
	}
}

// TestDocsWildcardEgressHostsGatewayAPITask walks the Gateway API tab of the same page:
// Istio's minimal profile with the page's flags (alpha Gateway API, access logs,
// REGISTRY_ONLY), sleep injected with kube-inject as the page's alternative writes it,
// the wildcard ServiceEntry and both titles direct; then the page's egress Gateway
// (wikipedia-egress-gateway, TLS passthrough on *.wikipedia.org, a ClusterIP Service),
// the TLSRoute from the ServiceEntry to it and the one from it to www.wikipedia.org
// (backendRef kind Hostname), with www.wikipedia.org's DNS ServiceEntry: both titles,
// and the gateway's clusters, grepped as the page greps them, show
// outbound|443||www.wikipedia.org with cx_total 2. Then the page's cleanup.
func TestDocsWildcardEgressHostsGatewayAPITask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=minimal -y \
    --set values.pilot.env.PILOT_ENABLE_ALPHA_GATEWAY_API=true \
    --set meshConfig.accessLogFile=/dev/stdout \
    --set meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY`)
	p.sh(`kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml)`)
	p.until("SOURCE_POD, sleep's one pod", func() string { return p.sh(`kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name}`) },
		func(s string) bool { return strings.HasPrefix(s, "sleep-") && !strings.Contains(s, " ") })
	const source = `export SOURCE_POD=$(kubectl get pod -l app=sleep -o jsonpath={.items..metadata.name})` + "\n"
	p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: wikipedia
spec:
  hosts:
  - "*.wikipedia.org"
  ports:
  - number: 443
    name: https
    protocol: HTTPS
EOF`)
	p.shows(wikipediaTitlesOut, source+wikipediaTitles)
	p.sh(`kubectl delete serviceentry wikipedia`)
	p.step("direct: both titles")

	out := p.sh(`kubectl apply -f - <<EOF
apiVersion: gateway.networking.k8s.io/v1beta1
kind: Gateway
metadata:
  name: wikipedia-egress-gateway
  annotations:
    networking.istio.io/service-type: ClusterIP
spec:
  gatewayClassName: istio
  listeners:
  - name: tls
    hostname: "*.wikipedia.org"
    port: 443
    protocol: TLS
    tls:
      mode: Passthrough
    allowedRoutes:
      namespaces:
        from: Same
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata:
  name: direct-wikipedia-to-egress-gateway
spec:
  parentRefs:
  - kind: ServiceEntry
    group: networking.istio.io
    name: wikipedia
  rules:
  - backendRefs:
    - name: wikipedia-egress-gateway-istio
      port: 443
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata:
  name: forward-wikipedia-from-egress-gateway
spec:
  parentRefs:
  - name: wikipedia-egress-gateway
  hostnames:
  - "*.wikipedia.org"
  rules:
  - backendRefs:
    - kind: Hostname
      group: networking.istio.io
      name: www.wikipedia.org
      port: 443
---
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: wikipedia
spec:
  hosts:
  - "*.wikipedia.org"
  ports:
  - number: 443
    name: https
    protocol: HTTPS
EOF`)
	// kubectl's lines (meshlab adds one on stderr for the gateway's pod it made).
	if !strings.HasPrefix(out, "gateway.gateway.networking.k8s.io/wikipedia-egress-gateway created\ntlsroute.gateway.networking.k8s.io/direct-wikipedia-to-egress-gateway created\ntlsroute.gateway.networking.k8s.io/forward-wikipedia-from-egress-gateway created\nserviceentry.networking.istio.io/wikipedia created\n") {
		t.Errorf("apply the egress Gateway's objects printed %q", out)
	}
	p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: www-wikipedia
spec:
  hosts:
  - www.wikipedia.org
  ports:
  - number: 443
    name: https
    protocol: HTTPS
  resolution: DNS
EOF`)
	p.shows(wikipediaTitlesOut, source+wikipediaTitles)
	p.step("through the Gateway API egress gateway: both titles")
	clusters := `kubectl exec "$(kubectl get pod -l gateway.networking.k8s.io/gateway-name=wikipedia-egress-gateway -o jsonpath='{.items[0].metadata.name}')" -c istio-proxy -- pilot-agent request GET clusters | grep '^outbound|443||www.wikipedia.org.*cx_total:'`
	if out := p.sh(clusters); !regexp.MustCompile(`^outbound\|443\|\|www\.wikipedia\.org::\d+\.\d+\.\d+\.\d+:443::cx_total::2\n$`).MatchString(out) {
		t.Errorf("the egress gateway's clusters, grepped as the page greps them:\n%s\nwant the page's outbound|443||www.wikipedia.org::ADDRESS:443::cx_total::2", out)
	}
	out = p.sh(`set -e
kubectl delete se wikipedia
kubectl delete se www-wikipedia
kubectl delete gtw wikipedia-egress-gateway
kubectl delete tlsroute direct-wikipedia-to-egress-gateway
kubectl delete tlsroute forward-wikipedia-from-egress-gateway
kubectl delete -f samples/sleep/sleep.yaml
istioctl uninstall --purge -y`)
	for _, want := range []string{
		`serviceentry.networking.istio.io "wikipedia" deleted`, `serviceentry.networking.istio.io "www-wikipedia" deleted`,
		`gateway.gateway.networking.k8s.io "wikipedia-egress-gateway" deleted`,
		`tlsroute.gateway.networking.k8s.io "direct-wikipedia-to-egress-gateway" deleted`,
		`tlsroute.gateway.networking.k8s.io "forward-wikipedia-from-egress-gateway" deleted`,
		"✔ Uninstall complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's cleanup printed no %q:\n%s", want, out)
		}
	}
}
