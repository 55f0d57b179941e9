package discovery

import (
	"maps"
	"net/netip"
	"strconv"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// BenchmarkBuildWDS is one WDS push of an ambient lab of n pods in one namespace (two per
// Service, as BenchmarkAmbientUpScale's) in which one pod just got its redirection
// annotation, the push an ambient pod's enrollment makes:
//
//	go test ./controlplane/discovery -run '^$' -bench BuildWDS
func BenchmarkBuildWDS(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			var svcs []*model.Service
			var pods []*model.Pod
			for i := range n {
				app := "svc-" + strconv.Itoa(i/2)
				if i%2 == 0 {
					svcs = append(svcs, &model.Service{Name: app, Namespace: "default", VIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
						Selector: map[string]string{"app": app}, Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080}}})
				}
				pods = append(pods, &model.Pod{Name: app + "-" + strconv.Itoa(i), Namespace: "default", Workload: app, Labels: map[string]string{"app": app},
					Annotations:    map[string]string{model.AnnotationAmbientRedirection: "enabled"},
					ServiceAccount: "default", IP: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})})
			}
			o := xds.WDSOptions{Node: "ml-bench-node"}
			// Two models that differ in one pod's annotation, pushed in turn.
			m0 := model.New(svcs, pods)
			last := *pods[n-1]
			last.Annotations = maps.Clone(last.Annotations)
			delete(last.Annotations, model.AnnotationAmbientRedirection)
			m1 := model.New(svcs, append(pods[:n-1:n-1], &last))
			snap, _, err := buildWDS(m0, o, nil, "v0")
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				m := m1
				if i%2 == 1 {
					m = m0
				}
				i++
				next, changed, err := buildWDS(m, o, snap, "v"+strconv.Itoa(i))
				if err != nil || !changed {
					b.Fatalf("buildWDS: changed %v, %v", changed, err)
				}
				snap = next
			}
		})
	}
}
