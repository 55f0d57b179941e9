package discovery

import (
	"maps"
	"net/netip"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// TestBuildWDSKeepsOnlyWhatIsTheSame: a snapshot built from the previous one (keeping
// the Workloads of unchanged pods) has the resources and versions of one built afresh,
// through a pod's annotation, its health, a pod added and removed, and a Service change.
func TestBuildWDSKeepsOnlyWhatIsTheSame(t *testing.T) {
	svc := func(name string, port uint16) *model.Service {
		return &model.Service{Name: name, Namespace: "default", VIP: netip.MustParseAddr("10.96.0." + strconv.Itoa(int(port)%200)),
			Selector: map[string]string{"app": name}, Ports: []model.ServicePort{{Name: "http", Port: port, TargetPort: port}}}
	}
	pod := func(i int, app string, redirected bool) *model.Pod {
		p := &model.Pod{Name: app + "-" + strconv.Itoa(i), Namespace: "default", Workload: app, Labels: map[string]string{"app": app},
			ServiceAccount: "default", IP: netip.AddrFrom4([4]byte{10, 244, 0, byte(i)}), Annotations: map[string]string{}}
		if redirected {
			p.Annotations[model.AnnotationAmbientRedirection] = "enabled"
		}
		return p
	}
	svcs := []*model.Service{svc("a", 8080), svc("b", 9090)}
	pods := []*model.Pod{pod(1, "a", true), pod(2, "a", false), pod(3, "b", true)}
	unready := map[string]bool{}
	o := xds.WDSOptions{Node: "ml-t-node", Unhealthy: func(p *model.Pod) bool { return unready[p.Key()] }}

	m := model.New(svcs, pods)
	steps := []struct {
		name string
		next func() *model.Model
	}{
		{"annotate", func() *model.Model {
			p := *m.Pods[1]
			p.Annotations = maps.Clone(p.Annotations)
			p.Annotations[model.AnnotationAmbientRedirection] = "enabled"
			ps := append([]*model.Pod(nil), m.Pods...)
			ps[1] = &p
			n := *m
			n.Pods = ps
			return &n
		}},
		{"unhealthy, same model", func() *model.Model { unready[m.Pods[0].Key()] = true; return m }},
		{"healthy again", func() *model.Model { delete(unready, m.Pods[0].Key()); return m }},
		{"pod added", func() *model.Model {
			n := *m
			n.Pods = append(append([]*model.Pod(nil), m.Pods...), pod(4, "b", true))
			return &n
		}},
		{"pod removed", func() *model.Model {
			n := *m
			n.Pods = append([]*model.Pod(nil), m.Pods[1:]...)
			return &n
		}},
		{"service port changed", func() *model.Model {
			n := *m
			n.Services = []*model.Service{svc("a", 8081), m.Services[1]}
			return &n
		}},
	}
	snap, _, err := buildWDS(m, o, nil, "v0")
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range steps {
		m = step.next()
		version := "v" + strconv.Itoa(i+1)
		got, _, err := buildWDS(m, o, snap, version)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want, _, err := buildWDS(m, o, nil, version)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range ztunnelTypes {
			g, w := got.types[typ], want.types[typ]
			if !maps.Equal(g.versions, w.versions) {
				t.Errorf("%s: %s versions\n got %v\nwant %v", step.name, typ, g.versions, w.versions)
			}
			for name, r := range w.res {
				if !proto.Equal(g.res[name], r) {
					t.Errorf("%s: %s %s\n got %v\nwant %v", step.name, typ, name, g.res[name], r)
				}
			}
			if g.sum != w.sum {
				t.Errorf("%s: %s sums differ", step.name, typ)
			}
		}
		// An unchanged pod's Workload is the one made before, not made again.
		if last := m.Pods[len(m.Pods)-1]; step.name == "annotate" {
			name := xds.PodUID("", last.Namespace, last.Name)
			if got.types[xds.AddressType].res[name] != snap.types[xds.AddressType].res[name] {
				t.Errorf("%s: %s was made again", step.name, name)
			}
		}
		snap = got
	}
}
