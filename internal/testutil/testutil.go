// Package testutil holds the helpers every meshlab test shares: the root gate, unique lab
// names, golden files, a slog logger routed to t.Logf and a TCP echo server.
package testutil

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// UpdateGoldenEnv is the switch that rewrites golden files instead of comparing them.
const UpdateGoldenEnv = "MESHLAB_UPDATE_GOLDEN"

// RequireRoot skips the test when it is not running as root, and fails it instead when
// CI=true, so a privileged test can never pass in CI by not running.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("this test needs root (network namespaces, iptables) and CI=true: run the suite as root (sudo make test)")
	}
	tb.Skip("skipped: this test needs root (network namespaces, iptables); run it with sudo make test")
}

// UniqueName returns a short name unique to this test run, usable in namespace and lab
// names ("t" + 6 hex digits); namespace names must stay short (IFNAMSIZ and readability).
func UniqueName(tb testing.TB) string {
	tb.Helper()
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("read random: %v", err)
	}
	return "t" + hex.EncodeToString(b[:])
}

// Golden compares got with the file testdata/<name>.golden, printing a diff and the
// command to refresh it on mismatch. With MESHLAB_UPDATE_GOLDEN=1 it rewrites the file.
func Golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv(UpdateGoldenEnv) == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file: %v\nto create it: %s=1 go test ./%s -run '%s'", err, UpdateGoldenEnv, pkgDir(), tb.Name())
	}
	if bytes.Equal(want, got) {
		return
	}
	tb.Errorf("%s differs from the generated output:\n%s\nto refresh: %s=1 go test ./%s -run '%s'",
		path, diff(want, got), UpdateGoldenEnv, pkgDir(), tb.Name())
}

func pkgDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "..."
	}
	for dir := wd; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, _ := filepath.Rel(dir, wd)
			return rel
		}
	}
	return "..."
}

// diff renders a unified diff with the system's diff(1) when present, else both texts.
func diff(want, got []byte) string {
	dir, err := os.MkdirTemp("", "golden")
	if err == nil {
		defer os.RemoveAll(dir)
		w, g := filepath.Join(dir, "want"), filepath.Join(dir, "got")
		if os.WriteFile(w, want, 0o600) == nil && os.WriteFile(g, got, 0o600) == nil {
			out, _ := exec.CommandContext(context.Background(), "diff", "-u", w, g).CombinedOutput()
			if len(out) > 0 {
				return string(out)
			}
		}
	}
	return fmt.Sprintf("--- want\n%s\n+++ got\n%s", want, got)
}

// Logger returns a slog.Logger that writes through t.Logf, so a test's logs appear only
// when it fails or runs with -v, and never after it ends.
func Logger(tb testing.TB) *slog.Logger {
	tb.Helper()
	return slog.New(slog.NewTextHandler(tWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// CheckErr fails t unless err matches want: nil when want is "", else an error whose text
// contains want. It returns whether err was an error, for tests that go on checking that a
// refused input changed nothing.
func CheckErr(tb testing.TB, what string, err error, want string) bool {
	tb.Helper()
	if want == "" {
		if err != nil {
			tb.Fatalf("%s = %v, want nil", what, err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		tb.Fatalf("%s = %v, want an error containing %q", what, err, want)
	}
	return true
}

// RefusingAddr returns a 127.0.0.1 address that refuses connections for the whole test: a
// socket bound there without listening holds the port (so no other test's server can take
// it, as could happen with a closed listener's port) and answers a SYN with a reset.
func RefusingAddr(tb testing.TB) netip.AddrPort {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatal(err)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port))
}

// SyncBuffer collects what a process or server writes while a test reads it: Write and
// String may run at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
