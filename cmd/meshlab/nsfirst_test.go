package main

import (
	"slices"
	"testing"
)

func TestNamespaceFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath={.spec.ports}"}, []string{"get", "-n", "istio-system", "service", "istio-ingressgateway", "-o", "jsonpath={.spec.ports}"}},
		{[]string{"--namespace", "foo", "exec", "deploy/curl", "--", "curl", "-n"}, []string{"exec", "-n", "foo", "deploy/curl", "--", "curl", "-n"}},
		{[]string{"--namespace=bar", "wait", "--for=condition=ready", "pod", "-l", "app=curl"}, []string{"wait", "-n", "bar", "--for=condition=ready", "pod", "-l", "app=curl"}},
		{[]string{"-n=legacy", "logs", "curl"}, []string{"logs", "-n", "legacy", "curl"}},
		{[]string{"get", "-n", "foo", "pods"}, []string{"get", "-n", "foo", "pods"}},
		{[]string{"-n", "foo"}, []string{"-n", "foo"}},
		{[]string{"-n", "foo", "--lab", "x", "get"}, []string{"-n", "foo", "--lab", "x", "get"}},
		{nil, nil},
	} {
		if got := namespaceFirst(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("namespaceFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The rewritten line parses: -n reaches the verb's own flag.
func TestNamespaceFirstParses(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	cmd, rest, err := root.Find(namespaceFirst([]string{"-n", "istio-system", "get", "svc", "istio-ingressgateway"}))
	if err != nil || cmd.Name() != "get" {
		t.Fatalf("Find: %v %v", cmd, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if ns, _ := cmd.Flags().GetString("namespace"); ns != "istio-system" {
		t.Fatalf("get's -n = %q, want istio-system", ns)
	}
}
