package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// kialiGraph is the part of Kiali's cytoscape JSON the test reads.
type kialiGraph struct {
	GraphType string `json:"graphType"`
	Elements  struct {
		Nodes []struct {
			Data struct {
				ID, NodeType, Namespace, Workload, App, Version, Service string
				IsRoot                                                   bool `json:"isRoot"`
			} `json:"data"`
		} `json:"nodes"`
		Edges []struct {
			Data struct {
				Source, Target string
				IsMTLS         string `json:"isMTLS"`
				Traffic        struct {
					Protocol string            `json:"protocol"`
					Rates    map[string]string `json:"rates"`
				} `json:"traffic"`
			} `json:"data"`
		} `json:"edges"`
	} `json:"elements"`
}

// edges names the graph's edges with traffic "source -> target", a node named by its
// service (svc:NAME), its workload (workload graphs) or its app.
func (g *kialiGraph) edges() []string {
	return g.edgesWith(func(string) bool { return true })
}

// edgesWith is edges, of the edges whose isMTLS is ok.
func (g *kialiGraph) edgesWith(ok func(isMTLS string) bool) []string {
	name := map[string]string{}
	for _, n := range g.Elements.Nodes {
		d := n.Data
		switch d.NodeType {
		case "service":
			name[d.ID] = "svc:" + d.Service
		case "workload":
			name[d.ID] = d.Workload
		default:
			name[d.ID] = d.App
		}
	}
	var out []string
	for _, e := range g.Elements.Edges {
		if e.Data.Traffic.Rates[e.Data.Traffic.Protocol] != "" && ok(e.Data.IsMTLS) {
			out = append(out, name[e.Data.Source]+" -> "+name[e.Data.Target])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDocsKialiTask walks "Visualizing Your Mesh" (tasks/observability/kiali): Bookinfo
// in the bookinfo namespace behind its gateway, samples/addons/prometheus.yaml and
// kiali.yaml, the page's `kubectl -n istio-system get svc kiali` and `istioctl dashboard
// kiali`, the page's traffic to productpage, then what the reader's graph page asks
// Kiali for: the versioned-app graph with service nodes, which shows the gateway ->
// productpage -> details and reviews -> ratings, and the workload graph. Then the page's
// details port renamed foo (Kiali's KIA0601 on the Service) and back (valid), and
// destination-rule-all applied and deleted, and kiali.yaml deleted.
func TestDocsKialiTask(t *testing.T) {
	testutil.RequireRoot(t)
	requirePrometheus(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`istioctl install -y
kubectl create namespace bookinfo
kubectl label namespace bookinfo istio-injection=enabled
kubectl -n bookinfo apply -f samples/bookinfo/platform/kube/bookinfo.yaml
kubectl -n bookinfo apply -f samples/bookinfo/networking/bookinfo-gateway.yaml
kubectl apply -f samples/addons/prometheus.yaml`)
	if out := p.sh(`kubectl apply -f samples/addons/kiali.yaml`); !strings.Contains(out, "deployment.apps/kiali created") {
		t.Fatalf("kubectl apply -f samples/addons/kiali.yaml:\n%s", out)
	}
	gw := strings.TrimSpace(p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
export INGRESS_PORT=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}')
echo "$INGRESS_HOST:$INGRESS_PORT"`))
	out := p.sh(`kubectl -n istio-system get svc kiali`)
	if !regexp.MustCompile(`^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\nkiali\s+ClusterIP\s+\d+\.\d+\.\d+\.\d+\s+<none>\s+20001/TCP,9090/TCP\s+\S+\n$`).MatchString(out) {
		t.Errorf("kubectl -n istio-system get svc kiali:\n%s", out)
	}
	kiali := p.addonDashboard("kiali", `^http://localhost:\d+/kiali\n$`)
	p.until("Kiali's status through the dashboard", func() string {
		out, _ := getBody(kiali + "/api")
		return out
	}, func(out string) bool { return strings.Contains(out, `"Kiali state":"running"`) })

	// The page's traffic (watch -n 1 curl ... $GATEWAY_URL/productpage), until the graph
	// the page shows is drawn: Prometheus scrapes every 15 s and rate needs two samples.
	want := []string{
		"istio-ingressgateway -> svc:productpage", "svc:productpage -> productpage",
		"productpage -> svc:details", "svc:details -> details",
		"productpage -> svc:reviews", "svc:reviews -> reviews",
		"reviews -> svc:ratings", "svc:ratings -> ratings",
	}
	graph := func(graphType, inject string) (kialiGraph, string) {
		body, _ := getBody(kiali + "/api/namespaces/graph?namespaces=bookinfo&graphType=" + graphType + "&duration=60s&injectServiceNodes=" + inject)
		var g kialiGraph
		_ = json.Unmarshal([]byte(body), &g)
		return g, body
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for range 10 {
			_, _ = p.outside("curl", "-s", "-o", "/dev/null", "http://"+gw+"/productpage")
		}
		g, body := graph("versionedApp", "true")
		edges := g.edges()
		missing := slices.DeleteFunc(slices.Clone(want), func(e string) bool { return slices.Contains(edges, e) })
		// The sidecars' and the gateway's auto mTLS: Kiali's security appender finds
		// every request of the page's traffic over mutual TLS. Its rates are the
		// destinations' reports, which Prometheus may scrape a little after the sources'
		// the edges are drawn from, as in Kiali.
		plain := g.edgesWith(func(m string) bool { return m != "100" })
		if len(missing) == 0 && len(plain) == 0 {
			p.step("Kiali's versioned app graph, all isMTLS 100: " + strings.Join(edges, ", "))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kiali's graph never showed %v, or all its edges over mTLS (not: %v); last answer:\n%.3000s", missing, plain, body)
		}
		time.Sleep(3 * time.Second)
	}
	g, body := graph("workload", "false")
	edges := g.edges()
	for _, e := range []string{"istio-ingressgateway -> productpage-v1", "productpage-v1 -> details-v1", "productpage-v1 -> reviews-v1"} {
		if !slices.Contains(edges, e) {
			t.Errorf("Kiali's workload graph has no edge %s: %v\n%.2000s", e, edges, body)
		}
	}
	for _, n := range g.Elements.Nodes {
		if n.Data.Workload == "productpage-v1" && (n.Data.NodeType != "workload" || n.Data.Namespace != "bookinfo" || n.Data.IsRoot) {
			t.Errorf("productpage's workload node: %+v", n.Data)
		}
	}
	p.step("Kiali's workload graph: " + strings.Join(edges, ", "))

	// The page's validation step: details' port renamed foo, which Kiali flags
	// (KIA0601) on the Service's details and in the namespace's summary; renamed back to
	// http, it is valid again.
	validation := func() string {
		body, _ := getBody(kiali + "/api/namespaces/bookinfo/services/details?validate=true")
		var d struct {
			Validations map[string]map[string]struct {
				Valid  bool
				Checks []struct{ Code, Message, Severity, Path string }
			}
		}
		_ = json.Unmarshal([]byte(body), &d)
		v, ok := d.Validations["service"]["details"]
		if !ok {
			return "no validation: " + body
		}
		out := "valid=" + strconv.FormatBool(v.Valid)
		for _, c := range v.Checks {
			out += "; " + c.Code + " " + c.Severity + " " + c.Path + ": " + c.Message
		}
		return out
	}
	if v := validation(); v != "valid=true" {
		t.Errorf("details' validation before the patch: %s", v)
	}
	if out := p.sh(`kubectl patch service details -n bookinfo --type json -p '[{"op":"replace","path":"/spec/ports/0/name", "value":"foo"}]'`); out != "service/details patched\n" {
		t.Errorf("the page's patch to foo: %q", out)
	}
	p.until("Kiali's KIA0601 on details' port", validation, func(v string) bool {
		return v == "valid=false; KIA0601 warning spec/ports[0]: Port name must follow <protocol>[-suffix] form"
	})
	if out, _ := getBody(kiali + "/api/istio/validations?namespaces=bookinfo"); !strings.Contains(out, `"bookinfo":{"errors":0,"objectCount":4,"warnings":1}`) {
		t.Errorf("Kiali's validation summary of bookinfo with details' port named foo: %s", out)
	}
	p.step("Kiali flags details' port foo: KIA0601")
	if out := p.sh(`kubectl patch service details -n bookinfo --type json -p '[{"op":"replace","path":"/spec/ports/0/name", "value":"http"}]'`); out != "service/details patched\n" {
		t.Errorf("the page's patch back to http: %q", out)
	}
	p.until("details valid again", validation, func(v string) bool { return v == "valid=true" })
	if out := p.sh(`kubectl -n bookinfo apply -f samples/bookinfo/networking/destination-rule-all.yaml
kubectl -n bookinfo delete -f samples/bookinfo/networking/destination-rule-all.yaml`); !strings.Contains(out, "destinationrule.networking.istio.io/reviews created") ||
		!strings.Contains(out, `destinationrule.networking.istio.io "reviews" deleted`) {
		t.Errorf("destination-rule-all applied and deleted:\n%s", out)
	}
	if out := p.sh(`kubectl delete -f samples/addons/kiali.yaml`); !strings.Contains(out, `deployment.apps "kiali" deleted`) {
		t.Errorf("kubectl delete -f samples/addons/kiali.yaml:\n%s", out)
	}
}
