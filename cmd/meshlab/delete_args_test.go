package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// TestDeleteRefs holds delete's arguments to kubectl's forms: KIND NAME..., KIND/NAME...,
// never both, and a KIND alone is an error naming what is missing.
func TestDeleteRefs(t *testing.T) {
	ref := func(kind, name string) api.ObjectRef { return api.ObjectRef{Kind: kind, Namespace: "foo", Name: name} }
	for _, c := range []struct {
		args []string
		want []api.ObjectRef
		err  string
	}{
		{args: []string{"vs", "reviews"}, want: []api.ObjectRef{ref("vs", "reviews")}},
		{args: []string{"dr", "reviews", "ratings"}, want: []api.ObjectRef{ref("dr", "reviews"), ref("dr", "ratings")}},
		{args: []string{"cm/nginx-configmap"}, want: []api.ObjectRef{ref("cm", "nginx-configmap")}},
		{args: []string{"vs/reviews", "destinationrule.networking.istio.io/reviews"},
			want: []api.ObjectRef{ref("vs", "reviews"), ref("destinationrule.networking.istio.io", "reviews")}},
		{args: []string{"vs"}, err: "give the names to delete"},
		{args: []string{"vs", "dr/reviews"}, err: `"dr/reviews": after a KIND, give names`},
		{args: []string{"vs/reviews", "ratings"}, err: `"ratings": want KIND/NAME`},
		{args: []string{"vs/"}, err: `"vs/": want KIND/NAME`},
	} {
		got, err := deleteRefs(c.args, "foo")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("deleteRefs(%q) = %v, %v; want an error containing %q", c.args, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("deleteRefs(%q) = %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
}

func TestFileRefsForIgnoreNotFound(t *testing.T) {
	t.Parallel()
	refs, err := fileRefs([]api.ConfigFile{{Name: "gw.yaml", Data: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: bookinfo-gateway\n---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: foo}\n---\n# only a comment\n"}}, "bar")
	want := []api.ObjectRef{{Kind: api.GatewayAPIGatewayKind, Namespace: "bar", Name: "bookinfo-gateway"}, {Kind: "VirtualService", Namespace: "foo", Name: "reviews"}}
	if err != nil || !slices.Equal(refs, want) {
		t.Errorf("fileRefs = %v, %v; want %v", refs, err, want)
	}
}
