package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadGetArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		want    []getTarget
		wantErr string
	}{
		{args: []string{"pods"}, want: []getTarget{{kind: "pods"}}},
		{args: []string{"svc", "details"}, want: []getTarget{{kind: "svc", name: "details"}}},
		{
			args: []string{"gatewayclass", "istio-agentgateway", "istio-agentgateway-waypoint"},
			want: []getTarget{{kind: "gatewayclass", name: "istio-agentgateway"}, {kind: "gatewayclass", name: "istio-agentgateway-waypoint"}},
		},
		{args: []string{"svc/details", "deploy/details-v1"}, want: []getTarget{{kind: "svc", name: "details"}, {kind: "deploy", name: "details-v1"}}},
		{args: []string{"svc", "svc/details"}, wantErr: "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'meshlab get resource/<resource_name>' instead of 'meshlab get resource resource/<resource_name>'"},
		{args: []string{"svc/details", "productpage"}, wantErr: `arguments in resource/name form must have a single resource and name: "productpage"`},
		{args: []string{"svc/"}, wantErr: `arguments in resource/name form must have a single resource and name: "svc/"`},
	} {
		got, err := readGetArgs(tc.args)
		switch {
		case tc.wantErr != "":
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("readGetArgs(%q) = %v, %v; want the error %q", tc.args, got, err, tc.wantErr)
			}
		case err != nil || !reflect.DeepEqual(got, tc.want):
			t.Errorf("readGetArgs(%q) = %v, %v; want %v", tc.args, got, err, tc.want)
		}
	}
}

func TestGroupGetTargets(t *testing.T) {
	t.Parallel()
	got := groupGetTargets([]getTarget{{"svc", "a"}, {"deploy", "b"}, {"svc", "c"}})
	want := [][]getTarget{{{"svc", "a"}, {"svc", "c"}}, {{"deploy", "b"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groupGetTargets = %v, want %v", got, want)
	}
}

// FuzzReadGetArgs holds get's argument reading to never panic and to name a kind in
// every target it returns.
func FuzzReadGetArgs(f *testing.F) {
	f.Add("gatewayclass istio-agentgateway istio-agentgateway-waypoint")
	f.Add("svc/details deploy/details-v1")
	f.Add("svc svc/x")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 {
			return
		}
		targets, err := readGetArgs(args)
		if err != nil {
			return
		}
		for _, tg := range targets {
			if tg.kind == "" {
				t.Fatalf("readGetArgs(%q): a target without a kind: %v", args, targets)
			}
		}
	})
}
