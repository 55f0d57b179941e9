package model

import "testing"

func TestDataplaneMode(t *testing.T) {
	t.Parallel()
	nsLabels := func(v string) []*Namespace {
		return []*Namespace{{Name: "a"}, {Name: "default", Labels: map[string]string{LabelDataplaneMode: v}}, {Name: "z"}}
	}
	for _, tc := range []struct {
		name   string
		ns     []*Namespace
		pod    Pod
		expect Dataplane
	}{
		{name: "undeclared namespace", pod: Pod{}, expect: DataplaneNone},
		{name: "namespace ambient", ns: nsLabels("ambient"), pod: Pod{}, expect: DataplaneAmbient},
		{name: "namespace none", ns: nsLabels("none"), pod: Pod{}, expect: DataplaneNone},
		{name: "pod ambient in plain namespace", pod: Pod{Labels: map[string]string{LabelDataplaneMode: "ambient"}}, expect: DataplaneAmbient},
		{name: "pod none opts out", ns: nsLabels("ambient"), pod: Pod{Labels: map[string]string{LabelDataplaneMode: "none"}}, expect: DataplaneNone},
		{name: "pod bad value follows namespace", ns: nsLabels("ambient"), pod: Pod{Labels: map[string]string{LabelDataplaneMode: "Ambient"}}, expect: DataplaneAmbient},
		{name: "sidecar never ambient", ns: nsLabels("ambient"), pod: Pod{Labels: map[string]string{LabelDataplaneMode: "ambient"}, Sidecar: SidecarSpec{Inject: true}}, expect: DataplaneSidecar},
		{name: "gateway", ns: nsLabels("ambient"), pod: Pod{Router: true}, expect: DataplaneNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := New(nil, nil)
			m.Namespaces = tc.ns
			p := tc.pod
			p.Namespace = "default"
			if got := DataplaneMode(m, &p); got != tc.expect {
				t.Errorf("DataplaneMode = %s, want %s", got, tc.expect)
			}
		})
	}
}

func TestNamespaceLookup(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	m.Namespaces = []*Namespace{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, n := range []string{"a", "b", "c"} {
		if got := m.Namespace(n); got == nil || got.Name != n {
			t.Errorf("Namespace(%q) = %v", n, got)
		}
	}
	if got := m.Namespace("bb"); got != nil {
		t.Errorf("Namespace(bb) = %v, want nil", got)
	}
}

func TestAmbientRedirected(t *testing.T) {
	t.Parallel()
	p := &Pod{Annotations: map[string]string{AnnotationAmbientRedirection: "enabled"}}
	if !p.AmbientRedirected() {
		t.Error("annotated pod not redirected")
	}
	p.Annotations[AnnotationAmbientRedirection] = "pending"
	if p.AmbientRedirected() {
		t.Error("pending pod redirected")
	}
}
