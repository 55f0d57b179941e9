package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCustomColumnsAsKubectlPrintsThem(t *testing.T) {
	t.Parallel()
	objs := []json.RawMessage{
		json.RawMessage(`{"metadata":{"name":"a","resourceVersion":"7","generation":2,"labels":{"app":"x"}},"spec":{"hosts":["h1","h2"]}}`),
		json.RawMessage(`{"metadata":{"name":"bb","resourceVersion":"12"},"spec":{}}`),
	}
	cases := []struct {
		name, spec, want string
	}{
		{name: "dotted paths", spec: "NAME:.metadata.name,RV:.metadata.resourceVersion,GEN:.metadata.generation",
			want: "NAME   RV    GEN\na      7     2\nbb     12    <none>\n"},
		{name: "relaxed forms and lists", spec: "N:metadata.name,HOSTS:{.spec.hosts[*]},APP:{metadata.labels.app}",
			want: "N     HOSTS    APP\na     h1,h2    x\nbb    <none>   <none>\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cols, ok, err := customColumnsOutput("custom-columns=" + tc.spec)
			if !ok || err != nil {
				t.Fatalf("read %q: %v %v", tc.spec, ok, err)
			}
			var b strings.Builder
			if err := printCustomColumns(&b, cols, objs); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
	for _, bad := range []string{"custom-columns=", "custom-columns=NAME", "custom-columns=NAME:{.a}}", "custom-columns=N:.a[", "custom-columns-file="} {
		if _, ok, err := customColumnsOutput(bad); !ok || err == nil {
			t.Errorf("%q: ok %v err %v, want it refused", bad, ok, err)
		}
	}
	if _, ok, _ := customColumnsOutput("jsonpath={.a}"); ok {
		t.Error("jsonpath taken for custom-columns")
	}
	cols, err := parseCustomColumnsTemplate(strings.NewReader("NAME   RV\nmetadata.name   {.metadata.resourceVersion}\n"))
	if err != nil || len(cols) != 2 || cols[1].path != "{.metadata.resourceVersion}" {
		t.Fatalf("template: %+v %v", cols, err)
	}
}

func FuzzCustomColumnsSpec(f *testing.F) {
	for _, s := range []string{"NAME:.metadata.name", "A:{.x[*]},B:y.z", "N:.a[?(@.b==\"c\")].d", ":", "A:{{}"} {
		f.Add(s)
	}
	obj := []json.RawMessage{json.RawMessage(`{"metadata":{"name":"a"},"a":[{"b":"c","d":1}],"x":[1,2]}`)}
	f.Fuzz(func(t *testing.T, spec string) {
		cols, err := parseCustomColumns(spec)
		if err != nil {
			return
		}
		if len(cols) != strings.Count(spec, ",")+1 {
			t.Fatalf("%q: %d columns", spec, len(cols))
		}
		var b strings.Builder
		_ = printCustomColumns(&b, cols, obj) // may fail on the object, never panic
	})
}
