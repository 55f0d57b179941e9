package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/meshlab/meshlab/api"
)

func TestNamespaceNames(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
		ok   bool
	}{
		{name: "kind and names", args: []string{"namespace", "foo", "bar"}, want: []string{"foo", "bar"}, ok: true},
		{name: "short kind", args: []string{"ns", "foo"}, want: []string{"foo"}, ok: true},
		{name: "plural", args: []string{"Namespaces", "foo"}, want: []string{"foo"}, ok: true},
		{name: "kind/name", args: []string{"ns/foo", "namespace/bar"}, want: []string{"foo", "bar"}, ok: true},
		{name: "kind alone", args: []string{"ns"}},
		{name: "other kind", args: []string{"svc", "foo"}},
		{name: "mixed kind/name", args: []string{"ns/foo", "svc/bar"}},
		{name: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := namespaceNames(tt.args)
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Errorf("namespaceNames(%q) = %q, %v; want %q, %v", tt.args, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCheckNamespaceNames(t *testing.T) {
	have := map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true, "istio-system": true, "foo": true, "bar": true}
	tests := []struct {
		name           string
		names          []string
		ignoreNotFound bool
		want           []string
		wantErrs       []string
	}{
		{name: "two", names: []string{"foo", "bar"}, want: []string{"foo", "bar"}},
		{name: "repeated once", names: []string{"foo", "foo"}, want: []string{"foo"}},
		{
			name: "missing among others", names: []string{"foo", "x", "bar"}, want: []string{"foo", "bar"},
			wantErrs: []string{`Error from server (NotFound): namespaces "x" not found`},
		},
		{name: "missing ignored", names: []string{"x", "foo"}, ignoreNotFound: true, want: []string{"foo"}},
		{
			name: "immortal", names: []string{"default", "kube-system", "kube-public", "foo"}, ignoreNotFound: true, want: []string{"foo"},
			wantErrs: []string{
				`Error from server (Forbidden): namespaces "default" is forbidden: this namespace may not be deleted`,
				`Error from server (Forbidden): namespaces "kube-system" is forbidden: this namespace may not be deleted`,
				`Error from server (Forbidden): namespaces "kube-public" is forbidden: this namespace may not be deleted`,
			},
		},
		{name: "kube-node-lease and istio-system go", names: []string{"kube-node-lease", "istio-system"}, want: []string{"kube-node-lease", "istio-system"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := checkNamespaceNames(tt.names, have, tt.ignoreNotFound)
			var gotErrs []string
			for _, e := range errs {
				gotErrs = append(gotErrs, e.Error())
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(gotErrs, tt.wantErrs) {
				t.Errorf("checkNamespaceNames(%q) = %q, %q; want %q, %q", tt.names, got, gotErrs, tt.want, tt.wantErrs)
			}
		})
	}
}

func TestNamespaceRefs(t *testing.T) {
	objs := []api.ConfigObject{
		{Kind: "Namespace", Namespace: "default", Name: "foo"},
		{Kind: "Namespace", Namespace: "default", Name: "bar"},
		{Kind: "Deployment", Namespace: "foo", Name: "httpbin"},
		{Kind: "Service", Namespace: "foo", Name: "httpbin"},
		{Kind: "ServiceAccount", Namespace: "foo", Name: "httpbin"},
		{Kind: "AuthorizationPolicy", Namespace: "foo", Name: "deny"},
		{Kind: "Pod", Namespace: "foo", Name: "bare"},
		{Kind: "Secret", Namespace: "foo", Name: "s"},
		{Kind: "Service", Namespace: "default", Name: "httpbin"},
		{Kind: "ClusterRole", Namespace: "foo", Name: "applied-with-n"},
		{Kind: "GatewayClass", Namespace: "foo", Name: "gc"},
		{Kind: "MeshConfig", Namespace: "", Name: "mesh"},
		{Kind: "Gateway", Namespace: "istio-system", Name: "ingress"},
	}
	refs := func(ns string) []string {
		var out []string
		for _, r := range namespaceRefs(ns, objs) {
			out = append(out, fmt.Sprintf("%s/%s/%s", r.Kind, r.Namespace, r.Name))
		}
		return out
	}
	if got, want := refs("foo"), []string{
		"Namespace/default/foo", "Deployment/foo/httpbin", "Service/foo/httpbin", "ServiceAccount/foo/httpbin",
		"AuthorizationPolicy/foo/deny", "Pod/foo/bare", "Secret/foo/s",
	}; !slices.Equal(got, want) {
		t.Errorf("namespaceRefs(foo) = %q, want %q", got, want)
	}
	if got, want := refs("istio-system"), []string{"MeshConfig//mesh", "Gateway/istio-system/ingress"}; !slices.Equal(got, want) {
		t.Errorf("namespaceRefs(istio-system) = %q, want %q (uninstall --purge's mesh config, and its objects)", got, want)
	}
	if got := refs("empty"); got != nil {
		t.Errorf("namespaceRefs(empty) = %q, want none", got)
	}
}

// FuzzNamespaceNames reads delete's arguments: whatever they are, names are given only
// for namespace arguments, one for each name after the kind or each KIND/NAME.
func FuzzNamespaceNames(f *testing.F) {
	f.Add("ns", "foo", "bar")
	f.Add("ns/foo", "namespace/bar", "")
	f.Add("svc", "x", "ns/y")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		args := []string{a, b, c}
		names, ok := namespaceNames(args)
		if !ok {
			if names != nil {
				t.Fatalf("namespaceNames(%q) = %q, not ok", args, names)
			}
			return
		}
		if len(names) == 0 || len(names) > len(args) {
			t.Fatalf("namespaceNames(%q) = %q", args, names)
		}
	})
}

func TestNamespacesOfFiles(t *testing.T) {
	files := []api.ConfigFile{
		{Name: "a.yaml", Data: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: foo\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: httpbin\n  namespace: foo\n"},
		{Name: "b.yaml", Data: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bar\n"},
		{Name: "c.yaml", Data: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sleep\n"},
	}
	got, err := namespacesOfFiles(files)
	if err != nil || !slices.Equal(got, []string{"foo", "bar"}) {
		t.Errorf("namespacesOfFiles = %q, %v; want [foo bar]", got, err)
	}
	if got, err := namespacesOfFiles(files[2:]); err != nil || got != nil {
		t.Errorf("namespacesOfFiles(no Namespace) = %q, %v; want none", got, err)
	}
}
