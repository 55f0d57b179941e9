package lab

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/ambient"
)

func TestFindPodAsKubectl(t *testing.T) {
	t.Parallel()
	r := &Record{Name: "t", Pods: []PodRecord{
		{Name: "reviews-v1-7c4b99cd-x7z2b", Namespace: "default", Workload: "reviews-v1"},
		{Name: "reviews-v1-7c4b99cd-b5k9q", Namespace: "default", Workload: "reviews-v1"},
		{Name: "curl-5f9cc9ddf9-65db7", Namespace: "legacy", Workload: "curl"},
		{Name: "frontend-v1", Namespace: "default", Workload: "frontend-v1"},
		// The mtls-migration task's shape: one Deployment's pods named the same in
		// three namespaces, and a bare pod in two, none of them default.
		{Name: "httpbin-5b7d9c8d4-qk2vz", Namespace: "foo", Workload: "httpbin"},
		{Name: "httpbin-5b7d9c8d4-qk2vz", Namespace: "bar", Workload: "httpbin"},
		{Name: "httpbin-5b7d9c8d4-qk2vz", Namespace: "default", Workload: "httpbin"},
		{Name: "sleep", Namespace: "foo", Workload: "sleep"},
		{Name: "sleep", Namespace: "bar", Workload: "sleep"},
	}}
	for _, tt := range []struct {
		ref, ns, want, wantNS, err string
	}{
		{ref: "frontend-v1", want: "frontend-v1"},
		{ref: "pod/frontend-v1", want: "frontend-v1"},
		{ref: "deploy/reviews-v1", want: "reviews-v1-7c4b99cd-b5k9q"}, // the first by name
		{ref: "deployments.apps/reviews-v1", want: "reviews-v1-7c4b99cd-b5k9q"},
		{ref: "deploy/curl", ns: "legacy", want: "curl-5f9cc9ddf9-65db7"},
		{ref: "deploy/curl", ns: "default", err: `unknown deploy "curl" in namespace default in lab t (valid: frontend-v1, httpbin, reviews-v1)`},
		{ref: "svc/reviews", err: `"svc/reviews": svc is not a kind that has pods`},
		{ref: "nope", err: `unknown pod "nope" in lab t (valid: curl-5f9cc9ddf9-65db7 (-n legacy), frontend-v1, httpbin-5b7d9c8d4-qk2vz, httpbin-5b7d9c8d4-qk2vz (-n bar), httpbin-5b7d9c8d4-qk2vz (-n foo), reviews-v1-7c4b99cd-b5k9q, reviews-v1-7c4b99cd-x7z2b, sleep (-n bar), sleep (-n foo))`},
		// A name several namespaces hold: default's, as kubectl's current namespace;
		// -n or istioctl's NAME.NAMESPACE choose; without default, -n is asked for.
		{ref: "httpbin-5b7d9c8d4-qk2vz", want: "httpbin-5b7d9c8d4-qk2vz", wantNS: "default"},
		{ref: "httpbin-5b7d9c8d4-qk2vz", ns: "foo", want: "httpbin-5b7d9c8d4-qk2vz", wantNS: "foo"},
		{ref: "deploy/httpbin", ns: "bar", want: "httpbin-5b7d9c8d4-qk2vz", wantNS: "bar"},
		{ref: "httpbin-5b7d9c8d4-qk2vz.bar", want: "httpbin-5b7d9c8d4-qk2vz", wantNS: "bar"},
		{ref: "sleep", err: `pod "sleep" is in namespaces bar, foo of lab t: choose one with -n NAMESPACE`},
		{ref: "deploy/sleep", err: `deploy "sleep" is in namespaces bar, foo of lab t: choose one with -n NAMESPACE`},
		{ref: "sleep", ns: "foo", want: "sleep", wantNS: "foo"},
		{ref: "sleep.legacy", err: `unknown pod "sleep" in namespace legacy`},
	} {
		p, err := r.FindPod(tt.ref, tt.ns)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("FindPod(%q, %q) = %v, %v; want error %q", tt.ref, tt.ns, p.Name, err, tt.err)
		case tt.err == "" && (err != nil || p.Name != tt.want || (tt.wantNS != "" && p.Namespace != tt.wantNS)):
			t.Errorf("FindPod(%q, %q) = %s/%s, %v; want %s/%s", tt.ref, tt.ns, p.Namespace, p.Name, err, tt.wantNS, tt.want)
		case tt.err == "" && p.Key != model.PodKey(p.Namespace, p.Name):
			t.Errorf("FindPod(%q, %q): key %q, want %q", tt.ref, tt.ns, p.Key, model.PodKey(p.Namespace, p.Name))
		}
	}
}

func TestFindPodKnowsTheZtunnelOnceItHasALog(t *testing.T) {
	t.Parallel()
	p := PathsFor(t.TempDir(), "zt")
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(p.Record(), &Record{Name: "zt", PodCIDR: netip.MustParsePrefix("10.244.0.0/22"),
		Pods: []PodRecord{{Name: "curl", Namespace: "default", Workload: "curl"}}}); err != nil {
		t.Fatal(err)
	}
	name := ambient.ZtunnelPodName("zt")
	r, err := ReadRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.FindPod(name, "istio-system"); err == nil {
		t.Fatalf("FindPod(%s) found a ztunnel that never started", name)
	}
	if err := os.MkdirAll(ztunnelDir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ZtunnelLogFile(p), []byte("started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = ReadRecord(p); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []struct{ ref, ns string }{{name, "istio-system"}, {name, ""}, {"ds/ztunnel", "istio-system"}, {name + ".istio-system", ""}} {
		got, err := r.FindPod(ref.ref, ref.ns)
		if err != nil {
			t.Fatalf("FindPod(%q, %q): %v", ref.ref, ref.ns, err)
		}
		if !got.Ztunnel || got.Name != name || got.Key != name+".istio-system" || got.IP != netip.MustParseAddr("10.244.3.254") {
			t.Fatalf("FindPod(%q, %q) = %+v; want the ztunnel pod %s at 10.244.3.254", ref.ref, ref.ns, got, name)
		}
	}
	b, err := os.ReadFile(p.Record())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "ztunnel") {
		t.Fatalf("lab.json names the ztunnel, which is derived: %s", b)
	}
}
