package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

// TestWaitAppsListening waits for a pod's app to listen on its container port in the
// pod's namespace, as the CI run's productpage had not when the ambient lab's first step
// sent traffic: it does not return while nothing listens, names the pod and port when
// its context ends first, returns once the app listens, and ignores a gateway's pod.
func TestWaitAppsListening(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := fmt.Sprintf("al%d", os.Getpid()%100000)
	pod := &model.Pod{Name: "web", Namespace: "default", IP: netip.MustParseAddr("10.244.0.9"), Ports: []uint16{9080}}
	gw := &model.Pod{Name: "gw", Namespace: "default", IP: netip.MustParseAddr("10.244.0.10"), Ports: []uint16{8080}, Router: true}
	l := &Lab{opts: Options{Name: name}, model: model.New(nil, []*model.Pod{pod, gw})}
	ns := NamespaceName(name, pod.Key())
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			t.Error(err)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err := WaitAppsListening(ctx, l)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), ns+" port [9080]") {
		t.Fatalf("nothing listening: %v, want the pod's port named and the deadline", err)
	}

	const delay = 300 * time.Millisecond
	listened := make(chan net.Listener, 1)
	go func() {
		time.Sleep(delay)
		var ln net.Listener
		err := netns.Do(ns, func() error {
			var err error
			ln, err = net.Listen("tcp", ":9080")
			return err
		})
		if err != nil {
			t.Errorf("listen in %s: %v", ns, err)
		}
		listened <- ln
	}()
	t.Cleanup(func() {
		if ln := <-listened; ln != nil {
			ln.Close()
		}
	})
	start := time.Now()
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := WaitAppsListening(ctx, l); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("returned after %v, before the app listened (%v)", took, delay)
	}
}
