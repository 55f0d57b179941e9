package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLastLines(t *testing.T) {
	data := []byte("a\nb\nc\n")
	for _, tc := range []struct {
		n    int
		want string
	}{
		{-1, "a\nb\nc\n"}, {0, ""}, {1, "c\n"}, {2, "b\nc\n"}, {3, "a\nb\nc\n"}, {10, "a\nb\nc\n"},
	} {
		if got := string(lastLines(data, tc.n)); got != tc.want {
			t.Errorf("lastLines(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := string(lastLines([]byte("x\ny"), 1)); got != "y" {
		t.Errorf("no trailing newline: %q", got)
	}
}

// syncBuf is a bytes.Buffer safe to read while printLog writes.
type syncBuf struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

func TestPrintLogFollowsAppendsAndStopsWhenTheFileGoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &syncBuf{mu: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- printLog(ctx, out, path, 1, true) }()
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("output %q never contained %q", out.String(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("two") // the tail is printed before anything is appended
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("three\n")
	f.Close()
	waitFor("three")
	if got := out.String(); got != "two\nthree\n" {
		t.Errorf("followed output = %q, want the last line, then the appended one", got)
	}
	os.Remove(path)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("printLog: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("printLog kept following a removed file")
	}
}
