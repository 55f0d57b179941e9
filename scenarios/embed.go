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

// Labs holds the bundled labs (labs/*.yaml): `kind: Lab` files run by `meshlab lab`.
//
//go:embed labs/*.yaml
var Labs embed.FS

// LookupLab returns the bundled lab called name and its file name.
func LookupLab(name string) ([]byte, string, error) {
	file := "labs/" + strings.TrimSuffix(name, ".yaml") + ".yaml"
	if strings.Contains(strings.TrimSuffix(name, ".yaml"), "/") || !fs.ValidPath(file) {
		return nil, "", fmt.Errorf("look up lab %q: not a lab name (have %s)", name, strings.Join(LabNames(), ", "))
	}
	data, err := Labs.ReadFile(file)
	if err != nil {
		return nil, "", fmt.Errorf("look up lab %q: no such bundled lab (have %s): %w", name, strings.Join(LabNames(), ", "), err)
	}
	return data, file, nil
}

// LabNames returns the names of the bundled labs, sorted.
func LabNames() []string {
	entries, err := fs.Glob(Labs, "labs/*.yaml")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(e, "labs/"), ".yaml"))
	}
	sort.Strings(names)
	return names
}
