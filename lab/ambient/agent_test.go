package ambient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/zds"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns/inpod"
)

// fakeZtunnel is ztunnel's side of ZDS: it dials, says hello and acks every request,
// recording each as a line ("add <ns>/<name> fd", "del <uid>", "snapshot_sent").
type fakeZtunnel struct {
	t      *testing.T
	u      *net.UnixConn
	ackErr func(*zds.WorkloadRequest) string // optional: the error to ack a request with

	mu  sync.Mutex
	got []string
	// holdAcks: no ack is written before this many requests came.
	holdAcks int
	uids     map[string]string // pod ns/name -> uid
	done     chan struct{}
}

func dialZtunnel(t *testing.T, socket string, ackErr func(*zds.WorkloadRequest) string) *fakeZtunnel {
	t.Helper()
	var u *net.UnixConn
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		u, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socket, Net: "unixpacket"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial ZDS: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	z := &fakeZtunnel{t: t, u: u, ackErr: ackErr, uids: map[string]string{}, done: make(chan struct{})}
	hello, _ := proto.Marshal(&zds.ZdsHello{Version: zds.Version_V1})
	if _, err := u.Write(hello); err != nil {
		t.Fatal(err)
	}
	go z.serve()
	t.Cleanup(z.close)
	return z
}

func (z *fakeZtunnel) close() {
	z.u.Close()
	<-z.done
}

func (z *fakeZtunnel) serve() {
	defer close(z.done)
	var held [][]byte
	for {
		buf := make([]byte, 1024)
		oob := make([]byte, unix.CmsgSpace(4*4))
		n, oobn, _, _, err := z.u.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if got, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		var req zds.WorkloadRequest
		if err := proto.Unmarshal(buf[:n], &req); err != nil {
			return
		}
		var line string
		switch p := req.Payload.(type) {
		case *zds.WorkloadRequest_Add:
			info := p.Add.GetWorkloadInfo()
			line = fmt.Sprintf("add %s/%s sa=%s fds=%d", info.GetNamespace(), info.GetName(), info.GetServiceAccount(), len(fds))
			z.mu.Lock()
			z.uids[info.GetNamespace()+"/"+info.GetName()] = p.Add.GetUid()
			z.mu.Unlock()
		case *zds.WorkloadRequest_Del:
			z.mu.Lock()
			for k, uid := range z.uids {
				if uid == p.Del.GetUid() {
					line = "del " + k
				}
			}
			z.mu.Unlock()
		case *zds.WorkloadRequest_SnapshotSent:
			line = "snapshot_sent"
		}
		ackErr := ""
		if z.ackErr != nil {
			ackErr = z.ackErr(&req)
		}
		z.mu.Lock()
		z.got = append(z.got, line)
		count, hold := len(z.got), z.holdAcks
		z.mu.Unlock()
		ack, _ := proto.Marshal(&zds.WorkloadResponse{Payload: &zds.WorkloadResponse_Ack{Ack: &zds.Ack{Error: ackErr}}})
		held = append(held, ack)
		if count < hold {
			continue
		}
		for _, ack := range held {
			if _, err := z.u.Write(ack); err != nil {
				return
			}
		}
		held = nil
	}
}

// waitFor waits until the fake has received want (in order).
func (z *fakeZtunnel) waitFor(want ...string) {
	z.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		z.mu.Lock()
		got := slices.Clone(z.got)
		z.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			z.t.Fatalf("ztunnel received:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lab is the fake lab of a NodeAgent: namespaces are files in a temp dir, rules go to a
// recorder, annotations to a map.
type lab struct {
	dir   string
	rules *inpod.Recorder

	mu          sync.Mutex
	annotations []string // "+key" / "-key", in order
	starts      int
}

func newAgent(t *testing.T) (*NodeAgent, *lab) {
	t.Helper()
	l := &lab{dir: t.TempDir(), rules: &inpod.Recorder{}}
	socketDir, err := os.MkdirTemp("/tmp", "zds") // a socket path must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(socketDir) })
	a := New(Deps{
		Log:         testutil.Logger(t),
		Socket:      filepath.Join(socketDir, "ztunnel.sock"),
		NetNS:       func(key string) string { return "ml-x-" + key },
		NetNSPath:   func(ns string) string { return filepath.Join(l.dir, ns) },
		Rules:       l.rules,
		RulesConfig: inpod.DefaultConfig(),
		SetRedirection: func(key string, on bool) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.annotations = append(l.annotations, map[bool]string{true: "+", false: "-"}[on]+key)
		},
		StartZtunnel: func() error { l.mu.Lock(); l.starts++; l.mu.Unlock(); return nil },
	})
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a, l
}

// makeNetNS makes the pod's namespace file (again: a new inode, a new incarnation).
func (l *lab) makeNetNS(t *testing.T, key string) {
	t.Helper()
	path := filepath.Join(l.dir, "ml-x-"+key)
	_ = os.Remove(path)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (l *lab) annotated() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.annotations)
}

func (l *lab) ruleCalls() []string {
	var out []string
	for _, c := range l.rules.Calls() {
		out = append(out, c.Op+" "+c.Namespace)
	}
	return out
}

func pod(name, mode string) *model.Pod {
	p := &model.Pod{Name: name, Namespace: "default", ServiceAccount: "sa-" + name, Labels: map[string]string{}}
	if mode != "" {
		p.Labels["istio.io/dataplane-mode"] = mode
	}
	return p
}

func waitEnrolled(t *testing.T, a *NodeAgent, keys ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.WaitEnrolled(ctx, keys); err != nil {
		t.Fatal(err)
	}
}

func TestEnrollBeforeZtunnelConnects(t *testing.T) {
	a, l := newAgent(t)
	for _, k := range []string{"a", "b", "plain"} {
		l.makeNetNS(t, k)
	}
	m := model.New(nil, []*model.Pod{pod("a", "ambient"), pod("b", "ambient"), pod("plain", "")})
	if err := a.Reconcile(m); err != nil {
		t.Fatal(err)
	}
	if got, want := l.ruleCalls(), []string{"install ml-x-a", "install ml-x-b"}; !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	if got := l.annotated(); len(got) != 0 || a.Mode("a") != "pending" {
		t.Fatalf("annotated %v (mode %q) before ztunnel acknowledged anything", got, a.Mode("a"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.WaitEnrolled(ctx, []string{"a"}); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("WaitEnrolled without ztunnel = %v, want not connected", err)
	}
	z := dialZtunnel(t, a.d.Socket, nil)
	z.waitFor("add default/a sa=sa-a fds=1", "add default/b sa=sa-b fds=1", "snapshot_sent")
	waitEnrolled(t, a, "a", "b")
	// Each annotation is set on a goroutine of its own, in any order.
	if got := l.annotated(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"+a", "+b"}) {
		t.Fatalf("annotations %v", got)
	}
	if l.starts != 1 {
		t.Fatalf("StartZtunnel called %d times, want once", l.starts)
	}
}

func TestEnrollRemoveLive(t *testing.T) {
	a, l := newAgent(t)
	z := dialZtunnel(t, a.d.Socket, nil)
	z.waitFor("snapshot_sent")
	l.makeNetNS(t, "a")
	if err := a.Reconcile(model.New(nil, []*model.Pod{pod("a", "ambient")})); err != nil {
		t.Fatal(err)
	}
	// Reconcile returns after ztunnel's ack; the annotation follows (WaitEnrolled).
	if a.Mode("a") != "pending" && a.Mode("a") != "enabled" {
		t.Fatalf("mode %q after Reconcile, want the pod held", a.Mode("a"))
	}
	if err := a.WaitAcked(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	waitEnrolled(t, a, "a")
	if got := l.annotated(); !slices.Equal(got, []string{"+a"}) || a.Mode("a") != "enabled" {
		t.Fatalf("annotations %v, mode %q", got, a.Mode("a"))
	}
	z.waitFor("snapshot_sent", "add default/a sa=sa-a fds=1")

	// The same model again (labels may change): nothing happens.
	p := pod("a", "ambient")
	p.Labels["version"] = "v2"
	if err := a.Reconcile(model.New(nil, []*model.Pod{p})); err != nil {
		t.Fatal(err)
	}
	// Opted out by its label: annotation off, rules out, ztunnel lets go.
	if err := a.Reconcile(model.New(nil, []*model.Pod{pod("a", "none")})); err != nil {
		t.Fatal(err)
	}
	z.waitFor("snapshot_sent", "add default/a sa=sa-a fds=1", "del default/a")
	if got := l.annotated(); !slices.Equal(got, []string{"+a", "-a"}) {
		t.Fatalf("annotations %v", got)
	}
	if got, want := l.ruleCalls(), []string{"install ml-x-a", "remove ml-x-a"}; !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	if a.Mode("a") != "" {
		t.Fatalf("mode %q after removal", a.Mode("a"))
	}
}

func TestPodMadeAgainIsEnrolledAgain(t *testing.T) {
	a, l := newAgent(t)
	z := dialZtunnel(t, a.d.Socket, nil)
	z.waitFor("snapshot_sent")
	l.makeNetNS(t, "a")
	m := model.New(nil, []*model.Pod{pod("a", "ambient")})
	if err := a.Reconcile(m); err != nil {
		t.Fatal(err)
	}
	l.makeNetNS(t, "a") // replaced under the same name: a new namespace
	if err := a.Reconcile(m); err != nil {
		t.Fatal(err)
	}
	z.waitFor("snapshot_sent", "add default/a sa=sa-a fds=1", "del default/a", "add default/a sa=sa-a fds=1")
	// A deleted pod: its namespace is gone, no rules to remove, ztunnel still told.
	os.Remove(filepath.Join(l.dir, "ml-x-a"))
	if err := a.Reconcile(model.New(nil, nil)); err != nil {
		t.Fatal(err)
	}
	z.waitFor("snapshot_sent", "add default/a sa=sa-a fds=1", "del default/a", "add default/a sa=sa-a fds=1", "del default/a")
	if got, want := l.ruleCalls(), []string{"install ml-x-a", "remove ml-x-a", "install ml-x-a"}; !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
}

func TestReconnectResendsEveryPod(t *testing.T) {
	a, l := newAgent(t)
	z := dialZtunnel(t, a.d.Socket, nil)
	z.waitFor("snapshot_sent")
	for _, k := range []string{"a", "b"} {
		l.makeNetNS(t, k)
	}
	if err := a.Reconcile(model.New(nil, []*model.Pod{pod("a", "ambient"), pod("b", "ambient")})); err != nil {
		t.Fatal(err)
	}
	z.waitFor("snapshot_sent", "add default/a sa=sa-a fds=1", "add default/b sa=sa-b fds=1")
	z.close() // ztunnel died
	deadline := time.Now().Add(5 * time.Second)
	for a.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not notice ztunnel's death")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The rules stay: no traffic goes around the missing proxy.
	if got := l.ruleCalls(); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "remove") }) {
		t.Fatalf("rules removed while ztunnel was away: %v", got)
	}
	z2 := dialZtunnel(t, a.d.Socket, nil)
	z2.waitFor("add default/a sa=sa-a fds=1", "add default/b sa=sa-b fds=1", "snapshot_sent")
	waitEnrolled(t, a, "a", "b")
	// Each annotation is set on a goroutine of its own, in any order.
	if got := l.annotated(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"+a", "+b"}) {
		t.Fatalf("annotations %v: a reconnect must not annotate again", got)
	}
}

func TestAckErrorFailsEnrollment(t *testing.T) {
	a, l := newAgent(t)
	z := dialZtunnel(t, a.d.Socket, func(r *zds.WorkloadRequest) string {
		if r.GetAdd() != nil {
			return "no such workload"
		}
		return ""
	})
	z.waitFor("snapshot_sent")
	l.makeNetNS(t, "a")
	err := a.Reconcile(model.New(nil, []*model.Pod{pod("a", "ambient")}))
	var ack *AckError
	if !errors.As(err, &ack) || !strings.Contains(err.Error(), "no such workload") {
		t.Fatalf("Reconcile = %v, want ztunnel's refusal", err)
	}
	if got := l.annotated(); len(got) != 0 {
		t.Fatalf("annotated %v after a refusal", got)
	}
}

func TestSidecarAndGatewayPodsAreNeverEnrolled(t *testing.T) {
	a, l := newAgent(t)
	side := pod("side", "ambient")
	side.Sidecar.Inject = true
	gw := pod("gw", "ambient")
	gw.Router = true
	if err := a.Reconcile(model.New(nil, []*model.Pod{side, gw})); err != nil {
		t.Fatal(err)
	}
	if got := l.ruleCalls(); len(got) != 0 {
		t.Fatalf("rules %v for pods that are not ambient", got)
	}
}

func TestPodUID(t *testing.T) {
	p := pod("a", "")
	u1, u2 := podUID(p, 1), podUID(p, 2)
	if u1 == u2 || u1 != podUID(p, 1) || len(u1) != 36 || u1[14] != '5' {
		t.Fatalf("uids %q %q: want stable per inode, UUID-shaped", u1, u2)
	}
}

func TestZtunnelNameAndIP(t *testing.T) {
	if a, b := ZtunnelPodName("demo"), ZtunnelPodName("demo"); a != b || len(a) != len("ztunnel-")+5 || ZtunnelPodName("other") == a {
		t.Fatalf("ZtunnelPodName: %q %q %q", a, b, ZtunnelPodName("other"))
	}
	for cidr, want := range map[string]string{"10.244.0.0/16": "10.244.255.254", "10.1.2.0/24": "10.1.2.254"} {
		if got := ZtunnelIP(netip.MustParsePrefix(cidr)); got.String() != want {
			t.Errorf("ZtunnelIP(%s) = %s, want %s", cidr, got, want)
		}
	}
	env := ZtunnelConfig{Socket: "/s", XDSAddress: "unix:///x", NodeName: "n", PodName: "p", InstanceIP: netip.MustParseAddr("10.0.0.1"), TrustDomain: "cluster.local", TokenFile: "/t", RootCert: "/r"}.Env()
	for _, want := range []string{"INPOD_UDS=/s", "CA_ADDRESS=unix:///x", "POD_NAMESPACE=istio-system", "SERVICE_ACCOUNT=ztunnel", "CLUSTER_ID=Kubernetes", "INSTANCE_IP=10.0.0.1"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %v", want, env)
		}
	}
}

// TestParallelEnroll enrolls pods being made at once, as up does, while ztunnel connects
// in the middle: every pod reaches ztunnel exactly once.
func TestParallelEnroll(t *testing.T) {
	a, l := newAgent(t)
	var pods []*model.Pod
	for i := range 20 {
		k := fmt.Sprintf("p%02d", i)
		l.makeNetNS(t, k)
		pods = append(pods, pod(k, "ambient"))
	}
	m := model.New(nil, pods)
	var wg sync.WaitGroup
	var z *fakeZtunnel
	for i, p := range pods {
		if i == 10 {
			z = dialZtunnel(t, a.d.Socket, nil)
		}
		wg.Go(func() {
			if installed, err := a.Enroll(m, p, "dns "+p.Key()); err != nil || !installed {
				t.Errorf("Enroll %s = %v, %v; want the pod's rules installed", p.Key(), installed, err)
			}
		})
	}
	wg.Wait()
	var keys []string
	for _, p := range pods {
		keys = append(keys, p.Key())
	}
	waitEnrolled(t, a, keys...)
	z.mu.Lock()
	defer z.mu.Unlock()
	adds := map[string]int{}
	for _, line := range z.got {
		if strings.HasPrefix(line, "add ") {
			adds[line]++
		}
	}
	if len(adds) != 20 {
		t.Fatalf("ztunnel got %d pods, want 20:\n%s", len(adds), strings.Join(z.got, "\n"))
	}
	for line, n := range adds {
		if n != 1 {
			t.Errorf("%s sent %d times", line, n)
		}
	}
	if got := l.annotated(); len(got) != 20 {
		t.Errorf("annotations %v, want 20", got)
	}
	// A pod being made costs one iptables-restore: its own rules with istio-cni's.
	for _, c := range l.rules.Calls() {
		if c.Op != "install-new" || c.Before != "dns "+strings.TrimPrefix(c.Namespace, "ml-x-") {
			t.Errorf("rules call %s %s with %q, want install-new with the pod's own rules", c.Op, c.Namespace, c.Before)
		}
	}
}

// TestEnrollHeldPod: a pod being made that a Reconcile of the new model enrolled first
// is left as it is, and Enroll says it did not install the pod's own rules, which the
// lab then installs itself; a pod that is not in ambient mode is not enrolled.
func TestEnrollHeldPod(t *testing.T) {
	a, l := newAgent(t)
	l.makeNetNS(t, "a")
	l.makeNetNS(t, "b")
	m := model.New(nil, []*model.Pod{pod("a", "ambient"), pod("b", "none")})
	if err := a.Reconcile(m); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Pods {
		if installed, err := a.Enroll(m, p, "dns"); err != nil || installed {
			t.Errorf("Enroll %s = %v, %v; want false, nil", p.Key(), installed, err)
		}
	}
	if got, want := l.ruleCalls(), []string{"install ml-x-a"}; !slices.Equal(got, want) {
		t.Errorf("rules calls %v, want %v", got, want)
	}
}

// TestRequestsPipelined: pods enrolled at once are all sent before ztunnel's first ack
// (a lock-step agent would wait for it after the first), each gets its own ack, in order.
func TestRequestsPipelined(t *testing.T) {
	a, l := newAgent(t)
	z := dialZtunnel(t, a.d.Socket, func(r *zds.WorkloadRequest) string {
		if r.GetAdd().GetWorkloadInfo().GetName() == "p03" {
			return "no room for p03"
		}
		return ""
	})
	z.waitFor("snapshot_sent")
	z.mu.Lock()
	z.holdAcks = 1 + 6 // snapshot_sent, then six adds
	z.mu.Unlock()
	var pods []*model.Pod
	for i := range 6 {
		k := fmt.Sprintf("p%02d", i)
		l.makeNetNS(t, k)
		pods = append(pods, pod(k, "ambient"))
	}
	m := model.New(nil, pods)
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { _, errs[i] = a.Enroll(m, p, "") })
	}
	wg.Wait()
	for i, err := range errs {
		var ack *AckError
		if want := i == 3; errors.As(err, &ack) != want {
			t.Errorf("Enroll %s: %v; want an AckError: %v", pods[i].Key(), err, want)
		}
	}
	waitEnrolled(t, a, pods[0].Key(), pods[1].Key(), pods[2].Key(), pods[4].Key(), pods[5].Key())
	if !a.Connected() {
		t.Error("the connection ended")
	}
}

// TestUnaskedMessageClosesConnection: ztunnel speaking unasked breaks the protocol; the
// agent drops the connection at once (its pods wait for the next).
func TestUnaskedMessageClosesConnection(t *testing.T) {
	a, _ := newAgent(t)
	z := dialZtunnel(t, a.d.Socket, nil)
	z.waitFor("snapshot_sent")
	ack, _ := proto.Marshal(&zds.WorkloadResponse{Payload: &zds.WorkloadResponse_Ack{Ack: &zds.Ack{}}})
	if _, err := z.u.Write(ack); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("still connected after an unasked message")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
