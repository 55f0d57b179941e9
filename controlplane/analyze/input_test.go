package analyze

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
)

// TestFilesReadsPathsAndStdin: `meshlab analyze -f` works offline on paths and stdin,
// names files by their base name in findings, and refuses an unreadable or oversized
// file by its name before analysing anything.
func TestFilesReadsPathsAndStdin(t *testing.T) {
	t.Parallel()
	base := filepath.Join("testdata", "base.yaml")
	bad, err := os.ReadFile(filepath.Join("testdata", "vs-host-not-found.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Files([]string{base, "-"}, strings.NewReader(string(bad)))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fs {
		if f.Code == "IST0101" && f.File == "-" {
			found = true
		}
	}
	if !found {
		t.Errorf("no IST0101 cited in stdin (\"-\"): %v", fs)
	}
	// The same documents through Documents (the lab's objects) find the same.
	baseData, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if docs := Documents([]Document{{Name: "base.yaml", Data: baseData}, {Name: "-", Data: bad}}); len(docs) != len(fs) {
		t.Errorf("Documents found %d, Files %d", len(docs), len(fs))
	}

	missing := filepath.Join(t.TempDir(), "nope.yaml")
	if _, err := Files([]string{base, missing}, nil); err == nil || !strings.HasPrefix(err.Error(), "read "+missing+": ") {
		t.Errorf("a missing file: %v", err)
	}
	huge := strings.NewReader(strings.Repeat("#", config.MaxFileBytes+1))
	if _, err := Files([]string{"-"}, huge); err == nil || err.Error() != "read -: the file is larger than the limit of 16.0 MiB for one file" {
		t.Errorf("stdin above the limit: %v", err)
	}
}
