package lab

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
)

func podNames(ps []*model.Pod) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// deployments renders Deployments ("ns/name" or "name": replicas, image) as apply sends
// them.
func deployments(ds ...struct {
	name     string
	replicas int
	image    string
},
) string {
	var b strings.Builder
	for _, d := range ds {
		ns, name, ok := strings.Cut(d.name, "/")
		if !ok {
			ns, name = "default", d.name
		}
		b.WriteString("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n")
		b.WriteString("  replicas: " + string(rune('0'+d.replicas)) + "\n  selector: {matchLabels: {app: " + name + "}}\n")
		b.WriteString("  template:\n    metadata: {labels: {app: " + name + "}}\n    spec: {containers: [{name: app, image: " + d.image + "}]}\n")
	}
	return b.String()
}

type dep = struct {
	name     string
	replicas int
	image    string
}

// The lab's diff of pods between two models built from Kubernetes objects, as a running
// lab computes it on apply: scaling adds and removes replicas and leaves the others; a
// changed template is a rollout (every pod replaced under new names); a Deployment in
// another namespace adds its own; deleting removes every pod of it.
func TestPlanPodsFollowsDeployments(t *testing.T) {
	build := func(prev *model.Model, ds ...dep) *model.Model {
		t.Helper()
		sc, err := config.Load("d.yaml", []byte(deployments(ds...)))
		if err != nil {
			t.Fatal(err)
		}
		o := config.BuildOptions{PodCIDR: DefaultPodCIDR, ServiceCIDR: DefaultServiceCIDR}
		if prev != nil {
			o.Keep = config.AllocationsOf(prev)
		}
		m, err := sc.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const httpbin, curl = "docker.io/kennethreitz/httpbin", "curlimages/curl"
	one := build(nil, dep{"httpbin", 1, httpbin}, dep{"curl", 1, curl})

	two := build(one, dep{"httpbin", 2, httpbin}, dep{"curl", 1, curl})
	plan := planPods(one, two)
	if len(plan.remove) != 0 || len(plan.add) != 1 || !strings.HasPrefix(plan.add[0].Name, "httpbin-") {
		t.Fatalf("scale httpbin to 2: remove %v, add %v; want one httpbin pod added", podNames(plan.remove), podNames(plan.add))
	}
	for _, p := range one.Pods {
		if q := two.Pod(p.Name); q == nil || q.IP != p.IP {
			t.Errorf("scaling moved or removed %s", p.Name)
		}
	}
	if back := planPods(two, build(two, dep{"httpbin", 1, httpbin}, dep{"curl", 1, curl})); len(back.add) != 0 || len(back.remove) != 1 || back.remove[0].Name != plan.add[0].Name {
		t.Errorf("scale back to 1: remove %v, add %v; want the added replica removed", podNames(back.remove), podNames(back.add))
	}

	rollout := planPods(two, build(two, dep{"httpbin", 2, "docker.io/mccutchen/go-httpbin"}, dep{"curl", 1, curl}))
	if len(rollout.remove) != 2 || len(rollout.add) != 2 {
		t.Fatalf("new image: remove %v, add %v; want both replicas replaced", podNames(rollout.remove), podNames(rollout.add))
	}
	for _, p := range rollout.add {
		if two.Pod(p.Name) != nil {
			t.Errorf("rollout pod %s keeps an old name; a new template gives new names", p.Name)
		}
	}

	other := build(one, dep{"httpbin", 1, httpbin}, dep{"curl", 1, curl}, dep{"foo/sleep", 1, curl})
	if p := planPods(one, other); len(p.remove) != 0 || len(p.add) != 1 || p.add[0].Namespace != "foo" {
		t.Errorf("sleep in foo: remove %v, add %v; want only foo's pod added", podNames(p.remove), podNames(p.add))
	}

	gone := planPods(two, build(two, dep{"curl", 1, curl}))
	if got := podNames(gone.remove); len(got) != 2 || len(gone.add) != 0 || !strings.HasPrefix(got[0], "default/httpbin-") || !strings.HasPrefix(got[1], "default/httpbin-") {
		t.Errorf("delete httpbin: remove %v, add %v; want both httpbin pods removed", got, podNames(gone.add))
	}
	if !planPods(two, two).empty() {
		t.Error("the same model plans changes")
	}
}

// Pods added to a running lab take the lowest free uids of the lab's block, never one a
// running pod holds, and never another lab's; a lab with no pod at up still holds its
// block.
func TestAllocateAppUIDsForLivePods(t *testing.T) {
	root := t.TempDir()
	newLab := func(name string, pods ...string) *Lab {
		p := PathsFor(root, name)
		if err := os.MkdirAll(p.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		l := &Lab{opts: Options{Name: name, RunRoot: root}, paths: p, rec: &Record{Name: name}}
		for _, n := range pods {
			l.rec.Pods = append(l.rec.Pods, PodRecord{Name: n})
		}
		if err := l.allocateAppUIDs(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	empty := newLab("empty")
	if empty.rec.AppUIDBase != appUIDFirst {
		t.Fatalf("a lab without pods: base %d, want the first block %d", empty.rec.AppUIDBase, appUIDFirst)
	}
	a := newLab("a", "p0", "p1", "p2")
	if a.rec.AppUIDBase != appUIDFirst+appUIDSlotSize {
		t.Errorf("lab a took block at %d; lab empty holds the first, want the second %d", a.rec.AppUIDBase, appUIDFirst+appUIDSlotSize)
	}
	// p1 goes, q and r come: q takes p1's uid, r the next free one.
	a.rec.Pods = slices.DeleteFunc(a.rec.Pods, func(r PodRecord) bool { return r.Name == "p1" })
	a.rec.Pods = append(a.rec.Pods, PodRecord{Name: "q"}, PodRecord{Name: "r"})
	if err := a.allocateAppUIDs(); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"p0": 0, "p2": 2, "q": 1, "r": 3}
	r, err := ReadRecord(a.paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Pods {
		if p.AppUID != a.rec.AppUIDBase+want[p.Name] {
			t.Errorf("%s: uid %d, want base+%d", p.Name, p.AppUID, want[p.Name])
		}
		if slot, err := a.podSlot(p.Name); err != nil || slot != int(want[p.Name]) {
			t.Errorf("podSlot(%s) = %d, %v; want %d", p.Name, slot, err, want[p.Name])
		}
	}
	// The empty lab's added pod lands in its own block.
	empty.rec.Pods = append(empty.rec.Pods, PodRecord{Name: "x"})
	if err := empty.allocateAppUIDs(); err != nil {
		t.Fatal(err)
	}
	if got := empty.rec.Pods[0].AppUID; got != appUIDFirst {
		t.Errorf("pod added to the empty lab: uid %d, want %d", got, appUIDFirst)
	}
}

// checkPodPlan refuses reserved pod names and more pods than a uid block, naming where
// the pod came from.
func TestCheckPodPlan(t *testing.T) {
	l := &Lab{opts: Options{Name: "t"}}
	pod := func(name string) *model.Pod {
		return &model.Pod{Name: name, Namespace: "default", IP: netip.MustParseAddr("10.244.0.9"),
			Origin: model.Origin{File: "w.yaml", Kind: "Pod", Namespace: "default", Name: name}}
	}
	cur := model.New(nil, nil)
	if err := l.checkPodPlan(cur, podPlan{add: []*model.Pod{pod("node")}}); err == nil ||
		!strings.Contains(err.Error(), `w.yaml: Pod default/node: metadata.name: pod name "node" is reserved`) {
		t.Errorf("a pod named node: %v", err)
	}
	many := make([]*model.Pod, appUIDSlotSize+1)
	for i := range many {
		many[i] = pod("p")
	}
	if err := l.checkPodPlan(cur, podPlan{add: many}); err == nil || !strings.Contains(err.Error(), "1025 pods, at most 1024") {
		t.Errorf("1025 pods: %v", err)
	}
	if err := l.checkPodPlan(cur, podPlan{add: []*model.Pod{pod("httpbin")}}); err != nil {
		t.Errorf("an ordinary pod: %v", err)
	}
}

// Clean does not look by name for the namespace of a pod the running lab removed (it is
// gone, and PIDsIn on it would fail), but does for one made again under the same name.
func TestLabNamespacesSkipsDeletedPods(t *testing.T) {
	root := t.TempDir()
	entries := []entry{
		{Kind: "netns", Name: "ml-zq9-node"},
		{Kind: "netns", Name: "ml-zq9-a"},
		{Kind: "netns", Name: "ml-zq9-b"},
		{Kind: "netns", Name: "ml-zq9-c"},
		{Kind: entryNetNSDeleted, Name: "ml-zq9-a"},
		{Kind: entryNetNSDeleted, Name: "ml-zq9-b"},
		{Kind: "netns", Name: "ml-zq9-b"},
	}
	got, err := labNamespaces(host.ns, root, "zq9", entries)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ml-zq9-node", "ml-zq9-c", "ml-zq9-b"}; !slices.Equal(got, want) {
		t.Errorf("labNamespaces = %v, want %v", got, want)
	}
}

// Once the lab stops, apply and delete change nothing: no pod may be made while Close
// removes them.
func TestApplyRefusedWhileStopping(t *testing.T) {
	t.Parallel()
	l := applyLab(t)
	before := l.model
	l.stopLivePods()
	if _, err := l.Apply(t.Context(), []api.ConfigFile{{Name: "dr.yaml", Data: testDR}}); !errors.Is(err, errLabStopping) {
		t.Errorf("Apply while stopping: %v, want %v", err, errLabStopping)
	}
	if _, err := l.Delete(t.Context(), nil, []api.ObjectRef{{Kind: "Workload", Name: "backend-v2"}}); !errors.Is(err, errLabStopping) {
		t.Errorf("Delete while stopping: %v, want %v", err, errLabStopping)
	}
	if l.model != before {
		t.Error("the model changed while the lab was stopping")
	}
}
