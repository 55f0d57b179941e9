package lab

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshlab/meshlab/controlplane/config"
)

// BenchmarkKubeViewGetYAML is what `get KIND -o yaml` asks of the lab's Kubernetes view
// for a kind of 100 objects (100 Deployments of one pod each, their Services, a
// VirtualService each): render the kind's objects as the API server returns them.
func BenchmarkKubeViewGetYAML(b *testing.B) {
	var sb strings.Builder
	for i := range 100 {
		fmt.Fprintf(&sb, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app%[1]d}
spec:
  selector: {matchLabels: {app: app%[1]d}}
  template:
    metadata: {labels: {app: app%[1]d}}
    spec: {containers: [{name: app, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 80}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: app%[1]d}
spec: {selector: {app: app%[1]d}, ports: [{name: http, port: 80}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: app%[1]d}
spec: {hosts: [app%[1]d], http: [{route: [{destination: {host: app%[1]d}}]}]}
`, i)
	}
	sc, err := config.Load("bench.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		b.Fatal(err)
	}
	v := kubeView{model: m, objects: sc.Objects, ready: map[string]bool{}, serviceCIDR: netip.MustParsePrefix("10.96.0.0/16"), conds: &conditionClock{}, now: time.Now(), decoded: &decodedWorkloads{}}
	for _, kind := range []string{"deploy", "svc", "vs"} {
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				objs, err := v.selected(kind, "", "", labels.Everything())
				if err != nil || len(objs) < 100 {
					b.Fatalf("%d objects: %v", len(objs), err)
				}
			}
		})
	}
}
