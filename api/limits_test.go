package api

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadLimited(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("a", MaxFileBytes)
	if data, err := ReadLimited("ok.yaml", strings.NewReader(ok)); err != nil || len(data) != MaxFileBytes {
		t.Fatalf("a file at the limit: %d bytes, %v", len(data), err)
	}
	if _, err := ReadLimited("big.yaml", strings.NewReader(ok+"a")); err == nil || err.Error() != "read big.yaml: the file is larger than the limit of 16.0 MiB for one file" {
		t.Fatalf("a file above the limit: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	if _, err := ReadFileLimited(missing); err == nil || !strings.HasPrefix(err.Error(), "read "+missing+": ") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
