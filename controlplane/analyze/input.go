package analyze

import (
	"io"
	"path/filepath"

	"github.com/meshlab/meshlab/controlplane/config"
)

// Document is one file of objects to analyse: its name, as findings cite it, and its
// YAML or JSON.
type Document struct {
	Name string
	Data []byte
}

// Documents analyses docs (a running lab's objects, each its own document) as Analyze.
func Documents(docs []Document) []Finding {
	files := make([]config.File, len(docs))
	for i, d := range docs {
		files[i] = config.File{Name: d.Name, Data: d.Data}
	}
	return Analyze(files)
}

// Files analyses the files at paths ("-" reads stdin) offline, as `istioctl analyze
// --use-kube=false` does: each file is read within the loader's limit on one file
// (config.MaxFileBytes) and named by its base name in findings. An unreadable file is an
// error naming it; what a file holds is only ever a finding.
func Files(paths []string, stdin io.Reader) ([]Finding, error) {
	files := make([]config.File, 0, len(paths))
	for _, p := range paths {
		var b []byte
		var err error
		if p == "-" {
			b, err = config.ReadLimited(p, stdin)
		} else {
			b, err = config.ReadFileLimited(p)
		}
		if err != nil {
			return nil, err
		}
		files = append(files, config.File{Name: filepath.Base(p), Data: b})
	}
	return Analyze(files), nil
}
