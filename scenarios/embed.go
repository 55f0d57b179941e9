// Package scenarios holds meshlab's bundled scenario files, embedded in the binary so
// that `meshlab up hello` works from any directory.
package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// FS holds the bundled scenario files (*.yaml).
//
//go:embed *.yaml
var FS embed.FS

// Lookup returns the bundled scenario called name ("hello" or "hello.yaml") and its file
// name, for messages.
func Lookup(name string) ([]byte, string, error) {
	file := strings.TrimSuffix(name, ".yaml") + ".yaml"
	if !fs.ValidPath(file) || strings.Contains(file, "/") {
		return nil, "", fmt.Errorf("look up scenario %q: not a scenario name (have %s)", name, strings.Join(Names(), ", "))
	}
	data, err := FS.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("look up scenario %q: no such bundled scenario (have %s): %w", name, strings.Join(Names(), ", "), err)
	}
	return data, file, nil
}

// Names returns the names of the bundled scenarios, without ".yaml", sorted.
func Names() []string {
	entries, err := fs.Glob(FS, "*.yaml")
	if err != nil {
		return nil // the pattern is constant and valid
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e, ".yaml"))
	}
	sort.Strings(names)
	return names
}
