package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/origdst"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

// The "plain TCP splice" path of BenchmarkDataPath: the cost of interception alone. The
// pod gets the sidecar's capture rules, and instead of a sidecar a helper process (this
// test binary re-run in the pod's namespace, TestSpliceHelper) accepts on the capture
// ports, dials the original destination and copies bytes both ways (Go's io.Copy between
// TCP connections uses splice(2)). It runs with gid 1337, so the capture rules exempt its
// own connections as they exempt the sidecar's.
const spliceHelperEnv = "MESHLAB_SPLICE_HELPER" // JSON spliceSpec

// spliceSpec says which capture ports the helper listens on.
type spliceSpec struct {
	Outbound uint16 `json:"outbound"`
	Inbound  uint16 `json:"inbound"`
	// InboundSource is the local address of the inbound leg to the app (127.0.0.6, as
	// the sidecar's inbound passthrough, so the capture rules do not capture it again).
	InboundSource string `json:"inboundSource"`
}

// TestSpliceHelper is not a test: it is the body of the splice helper process.
func TestSpliceHelper(t *testing.T) {
	raw := os.Getenv(spliceHelperEnv)
	if raw == "" {
		t.Skip("helper process for BenchmarkDataPath only")
	}
	var spec spliceSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	out, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", spec.Outbound))
	if err != nil {
		t.Fatal(err)
	}
	in, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", spec.Inbound))
	if err != nil {
		t.Fatal(err)
	}
	src := &net.TCPAddr{IP: net.ParseIP(spec.InboundSource)}
	fmt.Println("splice helper listening")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); spliceAccept(out, "outbound", nil) }()
	go func() { defer wg.Done(); spliceAccept(in, "inbound", src) }()
	wg.Wait() // until killed
}

// spliceAccept splices every connection accepted on ln to its original destination.
func spliceAccept(ln net.Listener, dir string, local *net.TCPAddr) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			down := c.(*net.TCPConn)
			defer down.Close()
			dst, err := origdst.OriginalDst(down)
			if err != nil {
				fmt.Printf("%s: %v\n", dir, err)
				return
			}
			d := net.Dialer{Timeout: 5 * time.Second}
			if local != nil {
				d.LocalAddr = local
			}
			uc, err := d.Dial("tcp", dst.String())
			if err != nil {
				fmt.Printf("%s: dial %s: %v\n", dir, dst, err)
				return
			}
			up := uc.(*net.TCPConn)
			defer up.Close()
			fmt.Printf("accepted %s %s -> %s\n", dir, down.RemoteAddr(), dst)
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, down)
				_ = up.CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(down, up)
			_ = down.CloseWrite()
			<-done
		}()
	}
}

// spliceProc is a running splice helper.
type spliceProc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// startSplice installs the sidecar capture rules in the namespace ns and starts a splice
// helper there in place of a sidecar; both go away with b's cleanup (the rules with the
// namespace).
func startSplice(b *testing.B, ns string) *spliceProc {
	b.Helper()
	c := capture.DefaultConfig()
	c.DNSCapturePort = 0 // no agent answers DNS in this pod
	if err := capture.NewApplier().Apply(ns, c.Render()); err != nil {
		b.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	spec, _ := json.Marshal(spliceSpec{Outbound: c.OutboundCapturePort, Inbound: c.InboundCapturePort,
		InboundSource: c.InboundPassthroughSource.String()})
	cmd := exec.Command(self, "-test.run", "^TestSpliceHelper$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), spliceHelperEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: c.ProxyGID}}
	p := &spliceProc{cmd: cmd, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := netns.Start(ns, cmd); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.out.String(), "splice helper listening") {
		select {
		case <-done:
			b.Fatalf("splice helper in %s exited:\n%s", ns, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("splice helper in %s did not start:\n%s", ns, p.out.String())
		}
	}
	return p
}

// accepted counts the connections the helper accepted in direction dir.
func (p *spliceProc) accepted(dir string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(p.out.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "accepted "+dir+" ") {
			n++
		}
	}
	return n
}
