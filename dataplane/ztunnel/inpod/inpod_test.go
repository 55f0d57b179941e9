package inpod

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/zds"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Handler that writes down what it was told.
type recorder struct {
	mu     sync.Mutex
	calls  []string
	failOn string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) AddPod(uid string, info *zds.WorkloadInfo, f *os.File) error {
	_ = f.Close()
	r.add("add " + uid + " " + info.GetNamespace() + "/" + info.GetName() + " sa=" + info.GetServiceAccount())
	if uid == r.failOn {
		return errors.New("boom")
	}
	return nil
}
func (r *recorder) KeepPod(uid string) error { r.add("keep " + uid); return nil }
func (r *recorder) DelPod(uid string) error  { r.add("del " + uid); return nil }
func (r *recorder) Snapshot(sent map[string]bool) {
	var uids []string
	for u := range sent {
		uids = append(uids, u)
	}
	slices.Sort(uids)
	r.add("snapshot " + strings.Join(uids, ","))
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// agent is the node agent's side of ZDS, as istio-cni's ztunnel server speaks it.
type agent struct {
	t    *testing.T
	conn *net.UnixConn
}

func (a *agent) send(req *zds.WorkloadRequest, fd int) string {
	a.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		a.t.Fatal(err)
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := a.conn.WriteMsgUnix(b, oob, nil); err != nil {
		a.t.Fatalf("send: %v", err)
	}
	buf := make([]byte, 1024)
	_ = a.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := a.conn.Read(buf)
	if err != nil {
		a.t.Fatalf("read ack: %v", err)
	}
	resp := &zds.WorkloadResponse{}
	if err := proto.Unmarshal(buf[:n], resp); err != nil {
		a.t.Fatal(err)
	}
	if resp.GetAck() == nil {
		a.t.Fatalf("answer %v is not an ack", resp)
	}
	return resp.GetAck().GetError()
}

func add(uid, name string) *zds.WorkloadRequest {
	return &zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Add{Add: &zds.AddWorkload{
		Uid: uid, WorkloadInfo: &zds.WorkloadInfo{Name: name, Namespace: "default", ServiceAccount: "sa-" + name},
	}}}
}

func TestZDSSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ztunnel.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rec := &recorder{failOn: "u3"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &Client{Path: path, Handler: rec, Log: testutil.Logger(t), Backoff: 50 * time.Millisecond}
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	netnsFd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(netnsFd)
	notNetns, err := unix.Open("/proc/self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(notNetns)

	for round := range 2 { // the second round is a reconnect: the agent replays
		conn, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		a := &agent{t: t, conn: conn}
		buf := make([]byte, 1024)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		hello := &zds.ZdsHello{}
		if err := proto.Unmarshal(buf[:n], hello); err != nil || hello.GetVersion() != zds.Version_V1 {
			t.Fatalf("hello = %v, %v; want V1", hello, err)
		}
		if round == 0 {
			if e := a.send(add("u1", "a"), netnsFd); e != "" {
				t.Errorf("add u1: ack error %q", e)
			}
			if e := a.send(add("u2", "b"), -1); !strings.Contains(e, "no network namespace") {
				t.Errorf("add without fd: ack error %q, want no network namespace", e)
			}
			if e := a.send(add("u2", "b"), notNetns); !strings.Contains(e, "not a network namespace") {
				t.Errorf("add with a uts namespace: ack error %q, want not a network namespace", e)
			}
			if e := a.send(add("u3", "c"), netnsFd); e != "boom" {
				t.Errorf("failing add: ack error %q, want boom", e)
			}
			if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_SnapshotSent{SnapshotSent: &zds.SnapshotSent{}}}, -1); e != "" {
				t.Errorf("snapshot: %q", e)
			}
			if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Del{Del: &zds.DelWorkload{Uid: "u1"}}}, -1); e != "" {
				t.Errorf("del: %q", e)
			}
			if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Keep{Keep: &zds.KeepWorkload{Uid: "u9"}}}, -1); !strings.Contains(e, "after snapshot_sent") {
				t.Errorf("keep after snapshot: ack error %q", e)
			}
		} else {
			if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Keep{Keep: &zds.KeepWorkload{Uid: "u1"}}}, -1); e != "" {
				t.Errorf("keep: %q", e)
			}
			if e := a.send(&zds.WorkloadRequest{Payload: &zds.WorkloadRequest_SnapshotSent{SnapshotSent: &zds.SnapshotSent{}}}, -1); e != "" {
				t.Errorf("snapshot: %q", e)
			}
		}
		_ = conn.Close()
	}
	want := []string{
		"add u1 default/a sa=sa-a", "add u3 default/c sa=sa-c", "snapshot u1,u3", "del u1",
		"keep u1", "snapshot u1",
	}
	if got := rec.got(); !slices.Equal(got, want) {
		t.Errorf("handler saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// testNetns makes a throwaway network namespace with lo up and returns it open.
func testNetns(t *testing.T) (string, *Netns) {
	t.Helper()
	testutil.RequireRoot(t)
	name := "ml-" + testutil.UniqueName(t) + "-zt"
	if err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	ip(t, name, "link", "set", "lo", "up")
	f, err := os.Open(netns.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	n := NewNetns(f)
	t.Cleanup(func() { _ = n.Close() })
	return name, n
}

func ip(t *testing.T, ns string, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v\n%s", args, err, out)
	}
}

// TestSocketsInPod: listeners made through Netns live in the pod's namespace and carry
// the mark; a dial with a source address not the pod's (ztunnel's inbound to the app)
// reaches the app from that address.
func TestSocketsInPod(t *testing.T) {
	name, n := testNetns(t)
	// The in-pod routing istio-cni installs sends replies to any client back to lo; a
	// narrower local route does the same for this test's fake client.
	ip(t, name, "route", "add", "local", "10.99.0.0/24", "dev", "lo")
	ip(t, name, "addr", "add", "10.98.0.5/32", "dev", "lo")

	ln, err := n.Listen("tcp", ":15008")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if m := markOf(t, ln); m != Mark {
		t.Errorf("listener mark = %#x, want %#x", m, Mark)
	}
	// Reachable inside the pod's namespace (the host's has no 10.98.0.5 and is left alone).
	if err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", "10.98.0.5:15008", time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		t.Errorf("dial the pod's 15008 from inside the pod: %v", err)
	}
	if c, err := ln.AcceptTCP(); err == nil {
		_ = c.Close()
	}

	app, err := n.Listen("tcp", "10.98.0.5:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := app.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client := netip.MustParseAddr("10.99.0.7")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := n.Dial(ctx, "tcp", client, netip.MustParseAddrPort("10.98.0.5:8080"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if m := markOf(t, c.(*net.TCPConn)); m != Mark {
		t.Errorf("dial mark = %#x, want %#x", m, Mark)
	}
	s, ok := <-accepted
	if !ok {
		t.Fatal("app accepted nothing")
	}
	defer s.Close()
	if got := s.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != client {
		t.Errorf("app sees the connection from %s, want the original client %s", got, client)
	}
	if _, err := s.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Errorf("reply through the transparent socket: %q, %v", buf, err)
	}
}

func markOf(t *testing.T, c syscall.Conn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var m int
	var serr error
	_ = rc.Control(func(fd uintptr) { m, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) })
	if serr != nil {
		t.Fatal(serr)
	}
	return m
}

// TestListenAll: the sockets ListenAll opens in one entry are of the kind asked, in the
// pod's namespace and marked; one that cannot be opened fails the call and closes the
// others.
func TestListenAll(t *testing.T) {
	name, n := testNetns(t)
	ip(t, name, "addr", "add", "10.98.0.6/32", "dev", "lo")
	socks, err := n.ListenAll([]Socket{{"tcp", ":15001"}, {"udp4", "127.0.0.1:15053"}, {"tcp4", "127.0.0.1:15053"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	ln, ok := socks[0].(*net.TCPListener)
	if !ok {
		t.Fatalf("socket 0 is a %T, want a TCP listener", socks[0])
	}
	if m := markOf(t, ln); m != Mark {
		t.Errorf("listener mark = %#x, want %#x", m, Mark)
	}
	if _, ok := socks[1].(net.PacketConn); !ok {
		t.Errorf("socket 1 is a %T, want a UDP socket", socks[1])
	}
	if _, ok := socks[2].(*net.TCPListener); !ok {
		t.Errorf("socket 2 is a %T, want a TCP listener", socks[2])
	}
	if err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", "10.98.0.6:15001", time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		t.Errorf("dial the pod's 15001 from inside the pod: %v", err)
	}
	// 15001 is taken now: the second socket fails and the first is closed again.
	if _, err := n.ListenAll([]Socket{{"tcp", ":15002"}, {"tcp", ":15001"}}); err == nil {
		t.Fatal("ListenAll on a port in use succeeded")
	}
	again, err := n.ListenAll([]Socket{{"tcp", ":15002"}})
	if err != nil {
		t.Fatalf("15002 still held after a failed ListenAll: %v", err)
	}
	again[0].Close()
}
