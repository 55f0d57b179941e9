package proxy

import (
	"os"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

var logLine = regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\]\[\d+\]\[info\]\[main\] initializing epoch 0`)
