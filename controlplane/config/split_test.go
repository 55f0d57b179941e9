package config

import (
	"strconv"
	"strings"
	"testing"
)

func TestSplitDocuments(t *testing.T) {
	t.Parallel()
	in := "\ufeffa: 1\n---\nb: 2\n--- {c: 3}\n---x: not a separator\n---\r\nd: 4"
	var got []string
	for _, d := range splitDocuments([]byte(in)) {
		got = append(got, strconv.Itoa(d.index)+"|"+strconv.Itoa(d.line)+"|"+strings.TrimSpace(string(d.data)))
	}
	want := []string{"1|1|a: 1", "2|2|b: 2", "3|4|{c: 3}\n---x: not a separator", "4|6|d: 4"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("documents:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An inline document after "---" keeps its columns and decodes.
	s, err := Load("t.yaml", []byte("--- {apiVersion: meshlab.dev/v1alpha1, kind: Workload, metadata: {name: w}}\n"))
	if err != nil || len(s.Objects) != 1 || s.Objects[0].Origin.Name != "w" {
		t.Errorf("Load inline document = %+v, %v", s, err)
	}
}
