package scenarios

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestLookup(t *testing.T) {
	for _, name := range []string{"hello", "hello.yaml"} {
		data, file, err := Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", name, err)
		}
		if file != "hello.yaml" || !strings.Contains(string(data), "kind: Workload") {
			t.Errorf("Lookup(%q) = %d bytes, %q", name, len(data), file)
		}
	}
	for _, name := range []string{"nope", "../go.mod", "", "sub/hello"} {
		if _, _, err := Lookup(name); err == nil || !strings.Contains(err.Error(), "hello") {
			t.Errorf("Lookup(%q) error = %v, want one listing the bundled scenarios", name, err)
		}
	}
}

func TestNames(t *testing.T) {
	if got := Names(); !slices.Contains(got, "hello") || !slices.IsSorted(got) {
		t.Errorf("Names() = %v, want a sorted list containing hello", got)
	}
}

// TestBookinfoLabIsTheSample holds the Bookinfo lab to Istio's sample: after its Lab
// document come the objects of samples/bookinfo/platform/kube/bookinfo.yaml, unchanged,
// so that the lab runs Bookinfo as the sample deploys it.
func TestBookinfoLabIsTheSample(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join(testutil.IstioSamples(t), "bookinfo", "platform", "kube", "bookinfo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lab, _, err := LookupLab("bookinfo")
	if err != nil {
		t.Fatal(err)
	}
	labObjects := objects(t, lab)
	if len(labObjects) == 0 || labObjects[0]["kind"] != "Lab" {
		t.Fatalf("the bookinfo lab does not begin with its Lab document")
	}
	if got, want := labObjects[1:], objects(t, sample); !reflect.DeepEqual(got, want) {
		t.Errorf("the bookinfo lab's objects are not the sample's:\n got %d objects %v\nwant %d objects %v", len(got), got, len(want), want)
	}
}

// objects decodes the YAML documents of data, skipping empty ones.
func objects(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for doc := range strings.SplitSeq(string(data), "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("decode %q: %v", doc, err)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
	return out
}
