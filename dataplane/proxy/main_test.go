package proxy

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }
