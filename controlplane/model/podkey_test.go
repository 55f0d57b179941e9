package model

import (
	"errors"
	"testing"
)

// Pods are keyed by namespace and name: the same name in three namespaces is three pods,
// named to the API as istioctl names them.
func TestPodKeysAndLookup(t *testing.T) {
	t.Parallel()
	m := &Model{Pods: []*Pod{
		{Name: "curl", Namespace: "foo"}, {Name: "curl", Namespace: "bar"}, {Name: "curl", Namespace: "legacy"},
		{Name: "httpbin", Namespace: "default"}, {Name: "httpbin", Namespace: "foo"},
		{Name: "fortio", Namespace: "legacy"},
	}}
	keys := map[string]bool{}
	for _, p := range m.Pods {
		if keys[p.Key()] {
			t.Fatalf("key %q of %s/%s is not unique", p.Key(), p.Namespace, p.Name)
		}
		keys[p.Key()] = true
	}
	if k := m.Pods[3].Key(); k != "httpbin" {
		t.Fatalf("a pod of default is keyed by its name, got %q", k)
	}
	for _, tc := range []struct{ ref, ns, name string }{
		{"curl.foo", "foo", "curl"}, {"curl.legacy", "legacy", "curl"},
		{"httpbin", "default", "httpbin"}, {"httpbin.default", "default", "httpbin"}, {"httpbin.foo", "foo", "httpbin"},
		{"fortio", "legacy", "fortio"}, // unique: found in any namespace
	} {
		p, err := m.LookupPod(tc.ref)
		if err != nil || p == nil || p.Namespace != tc.ns || p.Name != tc.name {
			t.Errorf("LookupPod(%q) = %v, %v; want %s/%s", tc.ref, p, err, tc.ns, tc.name)
		} else if m.Pod(p.Key()) != p {
			t.Errorf("Pod(%q) is not the pod keyed so", p.Key())
		}
	}
	p, err := m.LookupPod("curl")
	var amb *AmbiguousPodError
	if p != nil || !errors.As(err, &amb) || err.Error() != `pod "curl" is in namespaces bar, foo, legacy: choose one with -n NAMESPACE (or name it curl.bar)` {
		t.Errorf("LookupPod(curl) = %v, %v; want the namespaces to choose from", p, err)
	}
	for _, ref := range []string{"nope", "curl.baz", "fortio.default"} {
		if p, err := m.LookupPod(ref); p != nil || err != nil {
			t.Errorf("LookupPod(%q) = %v, %v; want nothing", ref, p, err)
		}
	}
}
