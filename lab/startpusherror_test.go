package lab

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/meshlab/meshlab/controlplane/discovery"
)

// pushErrorScenario is startScenario and a second sidecar pod, client; a VirtualService
// gives the client's proxy alone (sourceLabels) routes of about 360 KB, above the limit
// TestStartOneProxyErrorComesUp sets.
func pushErrorScenario() string {
	var b strings.Builder
	b.WriteString(startScenario)
	b.WriteString(`---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: client, namespace: default}
spec:
  labels: {app: client}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: default}
spec:
  hosts: [web]
  http:
`)
	pad := strings.Repeat("x", 1000)
	for i := range 150 {
		fmt.Fprintf(&b, "  - match: [{sourceLabels: {app: client}, uri: {exact: /%d/%s}}]\n    route: [{destination: {host: web}}]\n", i, pad)
	}
	b.WriteString("  - route: [{destination: {host: web}}]\n")
	return b.String()
}

// TestStartOneProxyErrorComesUp: a proxy whose config cannot be generated when the lab
// starts fails that proxy only, as in later updates: the lab comes up, its pod is
// reported not ready with the error, proxy-status and the event bus have the error, and
// the other sidecar is ready. Before, Start failed whole ("generate proxy config: ...").
func TestStartOneProxyErrorComesUp(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	var (
		out bytes.Buffer
		mu  sync.Mutex
		l   *Lab
	)
	_, o, err := startOnRecorder(t, rec, "st5", func(o Options) error {
		o.ScenarioData = []byte(pushErrorScenario())
		o.maxPushBytes = 256 << 10
		o.Out = &lockedWriter{mu: &mu, w: &out}
		var err error
		l, err = start(t.Context(), o, rec.system())
		return err
	})
	if err != nil {
		t.Fatalf("start: %v, want the lab up with the client pod not ready", err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		checkAllUndone(t, rec, o)
	}()
	mu.Lock()
	printed := out.String()
	mu.Unlock()
	if !strings.Contains(printed, "2 of 3 pods ready") || !strings.Contains(printed, "failed: client") ||
		!strings.Contains(printed, "its proxy's config was not generated") || !strings.Contains(printed, "above the 262144-byte limit") {
		t.Errorf("up printed:\n%s\nwant client failed with its push error and web ready", printed)
	}
	var client, web *discovery.ProxyStatus
	for _, st := range l.disc.Status() {
		switch podOfNode(st.NodeID) {
		case "client":
			client = &st
		case "web":
			web = &st
		}
	}
	if client == nil || web == nil {
		t.Fatalf("proxy status has client %v, web %v: want both", client, web)
	}
	if !strings.Contains(client.PushError, "above the") || web.PushError != "" {
		t.Errorf("push errors: client %q, web %q: want the client's size error alone", client.PushError, web.PushError)
	}
	found := false
	for _, e := range l.bus.Recent() {
		if e.Kind == discovery.EventPushError && e.Pod == "client" {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event for client on the bus", discovery.EventPushError)
	}
}

// lockedWriter serialises writes to w: the pods' progress lines come from their own
// goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
