package discovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// eventLog records observed events for a test.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// lines renders the events as "kind type version error" lines, without the node.
func (l *eventLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		short := e.TypeURL[strings.LastIndex(e.TypeURL, ".")+1:]
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", e.Kind, short, e.Version, e.Error)))
	}
	return out
}

func (l *eventLog) waitFor(t *testing.T, line string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(l.lines(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("event %q not observed; got %q", line, l.lines())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEventsObserveConnectPushAckNackDisconnect(t *testing.T) {
	t.Parallel()
	log := &eventLog{}
	s := startServer(t, Options{SocketGID: -1, OnEvent: log.add})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	ads := dialADS(t, "unix://"+s.path, m.Pod("frontend-v1").NodeID())
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType})
	cds := ads.recv()
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: "v1", ResponseNonce: cds.GetNonce()})
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType})
	lds := ads.recv()
	ads.send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: lds.GetNonce(),
		ErrorDetail: &status.Status{Message: "listener 'x': bad"}})
	log.waitFor(t, "xds.nack Listener v1 listener 'x': bad")

	want := []string{"xds.connected", "xds.pushed Cluster v1", "xds.ack Cluster v1", "xds.pushed Listener v1", "xds.nack Listener v1 listener 'x': bad"}
	if got := log.lines(); !slices.Equal(got, want) {
		t.Errorf("events =\n%q\nwant\n%q", got, want)
	}
	for _, e := range log.events {
		if e.NodeID != m.Pod("frontend-v1").NodeID() {
			t.Errorf("event %+v names node %q", e, e.NodeID)
		}
	}
	ads.closeSend()
	log.waitFor(t, "xds.disconnected")
}
