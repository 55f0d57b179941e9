package main

import (
	"io"
	"strings"
	"testing"
)

// TestRefusalsAsExecuted runs docs lines that meshlab does not take through the command
// tree as main does (Execute, then explainRefusal) and checks that each prints its
// refusal, and that a line meshlab takes, or an error of another kind, is left alone.
func TestRefusalsAsExecuted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want string // the refusal's first words; "" for an error that is not one
	}{
		{`kustomize "github.com/kubernetes-sigs/gateway-api/config/crd?ref=v1.1.0"`, "kustomize: "},
		{`-n istio-system patch --type=yaml deploy istio-egressgateway -p "[]"`, ""}, // kubectl's --type error, not a refusal
		{`cp example.com.crt default/sleep-1:/etc/ssl/ca.crt`, "cp into a pod: /etc/ssl/ca.crt: "},
		{`manifest apply -f ./istio.yaml`, "manifest: "},
		{`install profile=minimal`, "install: "},
		{`--lab some-lab kustomize github.com/kubernetes-sigs/gateway-api/config/crd`, "kustomize: "},
		{`get pods --no-such-flag`, ""},
	} {
		args := namespaceFirst(strings.Fields(tc.line))
		root := newRootCmd()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := explainRefusal(args, root.Execute())
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.line)
		case tc.want == "" && strings.Contains(err.Error(), ": meshlab"):
			t.Errorf("%s: %v, want cobra's own error", tc.line, err)
		case tc.want != "" && !strings.HasPrefix(err.Error(), tc.want):
			t.Errorf("%s: %v, want the refusal %q...", tc.line, err, tc.want)
		}
	}
	if err := explainRefusal([]string{"kustomize"}, nil); err != nil {
		t.Errorf("explainRefusal(no error) = %v", err)
	}
}
