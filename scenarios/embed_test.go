package scenarios

import (
	"slices"
	"strings"
	"testing"
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
