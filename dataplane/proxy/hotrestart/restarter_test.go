package hotrestart

import (
	"context"
	"errors"
	"hash/fnv"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"golang.org/x/sys/unix"
)

// testBaseID returns a base id no other test (or test process) uses, since abstract
// socket names are shared by everything in the network namespace.
func testBaseID(t *testing.T) uint32 {
	t.Helper()
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	return (uint32(os.Getpid())%20000)*20000 + h.Sum32()%20000 + 100000000
}

func newRestarter(t *testing.T, base, epoch uint32) *Restarter {
	t.Helper()
	r, err := New(Options{BaseID: base, Epoch: epoch, Logger: testutil.Logger(t), ReplyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("new restarter epoch %d: %v", epoch, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// fakeParent records what its child asked for.
type fakeParent struct {
	ln    *net.TCPListener
	start time.Time

	mu     sync.Mutex
	calls  []string
	termed chan struct{}
}

func (p *fakeParent) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, s)
}

func (p *fakeParent) ShutdownAdmin() time.Time { p.record("shutdown_admin"); return p.start }

func (p *fakeParent) ListenSocket(address string) *os.File {
	p.record("pass_listen_socket " + address)
	if address != "tcp://"+p.ln.Addr().String() {
		return nil
	}
	f, err := p.ln.File()
	if err != nil {
		return nil
	}
	return f
}

func (p *fakeParent) Stats() *Stats {
	p.record("stats")
	return &Stats{CounterDeltas: map[string]uint64{"http.in.downstream_rq_total": 42}, Gauges: map[string]uint64{GenerationGauge: 1}}
}

func (p *fakeParent) DrainListeners() { p.record("drain_listeners") }

func (p *fakeParent) Terminate() {
	p.record("terminate")
	close(p.termed)
}

// serveChildOf starts epoch 0 serving p to its child until the test ends, and returns
// the child, epoch 1.
func serveChildOf(t *testing.T, p Parent) *Restarter {
	t.Helper()
	base := testBaseID(t)
	parent := newRestarter(t, base, 0)
	child := newRestarter(t, base, 1)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- parent.ServeChild(ctx, p) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return child
}

// listenLocal listens on a free port of 127.0.0.1 until the test ends.
func listenLocal(t *testing.T) *net.TCPListener {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func TestChildTalksToParent(t *testing.T) {
	t.Parallel()
	ln := listenLocal(t)
	fp := &fakeParent{ln: ln, start: time.Unix(1700000000, 0), termed: make(chan struct{})}
	child := serveChildOf(t, fp)

	start, err := child.ShutdownAdmin()
	if err != nil || !start.Equal(fp.start) {
		t.Fatalf("ShutdownAdmin = %v, %v; want the parent's start time", start, err)
	}
	f, err := child.PassListenSocket("tcp://" + ln.Addr().String())
	if err != nil || f == nil {
		t.Fatalf("PassListenSocket = %v, %v; want the parent's socket", f, err)
	}
	adopted, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adopted.Close() })
	if adopted.Addr().String() != ln.Addr().String() {
		t.Errorf("adopted socket is bound to %s, want %s", adopted.Addr(), ln.Addr())
	}
	// The same socket: once the parent closes its fd, a connection is still accepted.
	_ = ln.Close()
	c, err := net.Dial("tcp", adopted.Addr().String())
	if err != nil {
		t.Fatalf("dial the adopted socket after the parent closed its fd: %v", err)
	}
	_ = c.Close()
	if a, err := adopted.Accept(); err != nil {
		t.Errorf("accept on the adopted socket: %v", err)
	} else {
		_ = a.Close()
	}
	if f, err := child.PassListenSocket("tcp://127.0.0.1:1"); err != nil || f != nil {
		t.Errorf("PassListenSocket for an address the parent lacks = %v, %v; want nil, nil (bind yourself)", f, err)
	}
	st, err := child.Stats()
	if err != nil || st.CounterDeltas["http.in.downstream_rq_total"] != 42 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if err := child.DrainListeners(); err != nil {
		t.Errorf("DrainListeners: %v", err)
	}
	if err := child.Terminate(); err != nil {
		t.Errorf("Terminate: %v", err)
	}
	select {
	case <-fp.termed:
	case <-time.After(5 * time.Second):
		t.Fatal("the parent never got terminate")
	}
	fp.mu.Lock()
	got := strings.Join(fp.calls, "\n")
	fp.mu.Unlock()
	want := strings.Join([]string{"shutdown_admin", "pass_listen_socket tcp://" + ln.Addr().String(), "pass_listen_socket tcp://127.0.0.1:1", "stats", "drain_listeners", "terminate"}, "\n")
	if got != want {
		t.Errorf("parent saw:\n%s\nwant:\n%s", got, want)
	}
	if _, err := child.Stats(); !errors.Is(err, ErrNoParent) {
		t.Errorf("after terminate, Stats error = %v, want ErrNoParent", err)
	}
}

func TestChildWithoutParent(t *testing.T) {
	t.Parallel()
	base := testBaseID(t)
	if _, err := newRestarter(t, base, 0).ShutdownAdmin(); !errors.Is(err, ErrNoParent) {
		t.Errorf("epoch 0 ShutdownAdmin error = %v, want ErrNoParent", err)
	}
	if _, err := newRestarter(t, base, 5).ShutdownAdmin(); !errors.Is(err, ErrNoPeer) {
		t.Errorf("epoch 5 without epoch 4: error = %v, want ErrNoPeer", err)
	}
}

func TestParentNotAnsweringTimesOut(t *testing.T) {
	t.Parallel()
	base := testBaseID(t)
	_ = newRestarter(t, base, 0) // bound but never serving
	child, err := New(Options{BaseID: base, Epoch: 1, Logger: testutil.Logger(t), ReplyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Close() })
	if _, err := child.ShutdownAdmin(); !errors.Is(err, ErrNoReply) {
		t.Errorf("error = %v, want ErrNoReply", err)
	}
}

func TestAtMostThreeProcesses(t *testing.T) {
	t.Parallel()
	base := testBaseID(t)
	for e := uint32(0); e < MaxConcurrentProcesses; e++ {
		_ = newRestarter(t, base, e)
	}
	if r, err := New(Options{BaseID: base, Epoch: 3, Logger: testutil.Logger(t)}); err == nil {
		_ = r.Close()
		t.Fatal("epoch 3 bound its sockets while epoch 0 still runs")
	} else if !strings.Contains(err.Error(), "unable to bind domain socket") {
		t.Errorf("error = %v", err)
	}
}

func TestUnknownRequestIsAnsweredDidntRecognize(t *testing.T) {
	t.Parallel()
	child := serveChildOf(t, &fakeParent{termed: make(chan struct{})})
	if _, _, err := child.request(&Request{Kind: 9}, true); err == nil || !strings.Contains(err.Error(), "did not recognize") {
		t.Errorf("error = %v, want did not recognize", err)
	}
}

// TestPassListenSocketLeavesParentNonBlocking pins the fix for a parent whose drain
// hung: passing its listen socket must not put the file description it shares with the
// child in blocking mode, or its accept waits in the kernel, and closing the listener
// (the drain) waits for that accept.
func TestPassListenSocketLeavesParentNonBlocking(t *testing.T) {
	t.Parallel()
	ln := listenLocal(t)
	child := serveChildOf(t, &fakeParent{ln: ln, termed: make(chan struct{})})
	f, err := child.PassListenSocket("tcp://" + ln.Addr().String())
	if err != nil || f == nil {
		t.Fatalf("PassListenSocket = %v, %v; want the parent's socket", f, err)
	}
	t.Cleanup(func() { _ = f.Close() })
	sc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var nb bool
	var nbErr error
	if err := sc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nb, nbErr = fl&unix.O_NONBLOCK != 0, err
	}); err != nil || nbErr != nil {
		t.Fatalf("read the listener's mode: %v, %v", err, nbErr)
	}
	if !nb {
		t.Fatal("the parent's listen socket is in blocking mode after it was passed to the child")
	}
	accepted := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close()
		}
		close(accepted)
	}()
	time.Sleep(50 * time.Millisecond) // let Accept wait
	closed := make(chan struct{})
	go func() { _ = ln.Close(); close(closed) }()
	select {
	case <-closed:
		<-accepted
	case <-time.After(5 * time.Second):
		t.Fatal("closing the parent's listener waited for its pending accept")
	}
}
