package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// helperBinary is a copy of this test binary that uid 1337 can execute (go test's own
// build directory is 0700), so the fake proxy really runs with the proxy's credentials.
// Empty when not root.
var helperBinary string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" && os.Geteuid() == 0 {
		dir, err := copyTestBinary()
		if err != nil {
			fmt.Fprintln(os.Stderr, "copy test binary:", err)
			os.Exit(1)
		}
		helperBinary = filepath.Join(dir, "agent.test")
		code := m.Run()
		os.RemoveAll(dir)
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func copyTestBinary() (string, error) {
	dir, err := os.MkdirTemp("", "ml-agent-test-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, "agent.test"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", err
	}
	return dir, dst.Close()
}
