package main

import (
	"slices"
	"strings"
	"testing"
)

func TestMetaArgsAsKubectl(t *testing.T) {
	t.Parallel()
	objs, pairs := splitMetaArgs([]string{"namespace", "default", "istio-injection=enabled", "foo-", "note="})
	if !slices.Equal(objs, []string{"namespace", "default"}) || !slices.Equal(pairs, []string{"istio-injection=enabled", "foo-", "note="}) {
		t.Fatalf("split: objects %v, pairs %v", objs, pairs)
	}
	set, remove, err := parseMetaPairs(labelVerb, pairs)
	if err != nil || set["istio-injection"] != "enabled" || set["note"] != "" || !slices.Equal(remove, []string{"foo"}) {
		t.Fatalf("parse: set %v remove %v err %v", set, remove, err)
	}
	for _, tt := range []struct {
		verb  metaVerb
		pairs []string
		want  string
	}{
		{labelVerb, []string{"a=has space"}, `invalid label value: "a=has space"`},
		{labelVerb, []string{"bad key=x"}, `invalid label key "bad key"`},
		{annotVerb, []string{"a=has space"}, ""},
		{labelVerb, []string{"a=b", "a-"}, "can not both modify and remove the following labels in the same command: a"},
	} {
		_, _, err := parseMetaPairs(tt.verb, tt.pairs)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s %v: %v, want %q", tt.verb.name, tt.pairs, err, tt.want)
		}
	}
}

// Without --overwrite kubectl label accepts a key set again to the value it has;
// kubectl annotate refuses any key that has a value.
func TestNoOverwriteAsKubectl(t *testing.T) {
	t.Parallel()
	cur := map[string]string{"istio-injection": "enabled"}
	if err := checkNoOverwrite(labelVerb, cur, map[string]string{"istio-injection": "enabled", "x": "y"}); err != nil {
		t.Errorf("label to the same value: %v", err)
	}
	err := checkNoOverwrite(labelVerb, cur, map[string]string{"istio-injection": "disabled"})
	if err == nil || err.Error() != "'istio-injection' already has a value (enabled), and --overwrite is false" {
		t.Errorf("label to another value: %v", err)
	}
	err = checkNoOverwrite(annotVerb, cur, map[string]string{"istio-injection": "enabled"})
	if err == nil || err.Error() != "--overwrite is false but found the following declared annotation(s): 'istio-injection' already has a value (enabled)" {
		t.Errorf("annotate to the same value: %v", err)
	}
}
