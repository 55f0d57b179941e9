// Package conformance pins behaviours every Envoy running as an Istio sidecar has, by
// running the same cases against `meshlab proxy` (always) and `envoy` (when it is on
// PATH): each target is a real process started with a static bootstrap, in front of real
// upstream servers on 127.0.0.1.
package conformance

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// target is a proxy implementation: the argv that starts it before Envoy's flags.
type target struct {
	name string
	argv func(t *testing.T) []string
}

var targets = []target{
	{"meshlab-proxy", func(t *testing.T) []string {
		t.Helper()
		return []string{meshlabBin(t), "proxy"}
	}},
	{"envoy", func(t *testing.T) []string {
		t.Helper()
		p, err := exec.LookPath("envoy")
		if err != nil {
			t.Skip("envoy not on PATH")
		}
		return []string{p}
	}},
}

// meshlabBin builds the meshlab binary once.
func meshlabBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "meshlab-conformance-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "meshlab")
		out, err := exec.Command("go", "build", "-o", binPath, "../../../cmd/meshlab").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// run runs the target to completion and returns its exit code, stdout and stderr.
func run(t *testing.T, argv []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(argv[0], append(append([]string{}, argv[1:]...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v %v did not exit", argv, args)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// proc is a running proxy.
type proc struct {
	admin string // host:port of the admin listener
}

// start starts the target serving bootstrap and waits for its admin address. Cleanup
// kills it.
func start(t *testing.T, argv []string, dir, bootstrap string) *proc {
	t.Helper()
	cfg := filepath.Join(dir, "bootstrap.json")
	if err := os.WriteFile(cfg, []byte(bootstrap), 0o644); err != nil {
		t.Fatal(err)
	}
	adminPath := filepath.Join(dir, "admin-address")
	cmd := exec.Command(argv[0], append(append([]string{}, argv[1:]...),
		"-c", cfg, "--disable-hot-restart", "--admin-address-path", adminPath, "-l", "warning", "--concurrency", "1")...)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("proxy output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(adminPath)
		if err == nil && len(b) > 0 {
			return &proc{admin: strings.TrimSpace(string(b))}
		}
		select {
		case <-done:
			t.Fatalf("proxy exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin address after 15s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort returns a 127.0.0.1 port free right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
