package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Each lab under the root is listed in name order: running when its record's process is
// alive, stopped when it is not or the record is unreadable.
func TestSummaries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name string, r *Record) {
		t.Helper()
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := []byte("{not json")
		if r != nil {
			var err error
			if data, err = json.Marshal(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "lab.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b-live", &Record{Name: "b-live", PID: os.Getpid(), Scenario: "hello.yaml", Pods: []PodRecord{{Name: "x"}, {Name: "y"}}})
	write("a-dead", &Record{Name: "a-dead", PID: 0, Scenario: "s.yaml", Pods: []PodRecord{{Name: "x"}}})
	write("c-broken", nil)
	got, err := Summaries(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Summary{
		{Name: "a-dead", State: "stopped (run meshlab clean)", Pods: 1, Scenario: "s.yaml"},
		{Name: "b-live", State: "running", Pods: 2, Scenario: "hello.yaml"},
		{Name: "c-broken", State: "stopped (run meshlab clean)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got, err := Summaries(filepath.Join(root, "none")); err != nil || len(got) != 0 {
		t.Errorf("missing root: %v, %v", got, err)
	}
}
