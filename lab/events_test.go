package lab

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

func TestBusHistoryThenLive(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := newBus(3, func() time.Time { return at })
	for i := range 5 {
		b.Publish(api.Event{Kind: "k", Message: fmt.Sprint(i)})
	}
	recent := b.Recent()
	if len(recent) != 3 || recent[0].Seq != 3 || recent[2].Seq != 5 || recent[2].Message != "4" || !recent[0].Time.Equal(at) {
		t.Fatalf("Recent = %+v; want seq 3..5, stamped", recent)
	}
	history, live, cancel := b.Subscribe(4, 2)
	defer cancel()
	if len(history) != 1 || history[0].Seq != 5 {
		t.Errorf("history after 4 = %+v; want only seq 5", history)
	}
	b.Publish(api.Event{Kind: "pod.ready", Pod: "p", Fields: map[string]any{"ms": 3}})
	select {
	case e := <-live:
		if e.Seq != 6 || e.Pod != "p" || e.Fields["ms"] != 3 {
			t.Errorf("live event = %+v", e)
		}
	case <-time.After(time.Second):
		t.Fatal("no live event")
	}
}

func TestBusCopiesFields(t *testing.T) {
	b := NewBus(10)
	f := map[string]any{"a": 1}
	b.Publish(api.Event{Kind: "k", Fields: f})
	f["a"] = 2
	if got := b.Recent()[0].Fields["a"]; got != 1 {
		t.Errorf("retained event's field changed with the caller's map: %v", got)
	}
}

// A subscriber that falls behind is cut off (channel closed), never blocks Publish, and
// can resume from the last event it saw without a gap.
func TestBusCutsOffSlowSubscriber(t *testing.T) {
	b := NewBus(100)
	_, live, cancel := b.Subscribe(0, 2)
	defer cancel()
	done := make(chan struct{})
	go func() {
		for range 10 {
			b.Publish(api.Event{Kind: "k"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Publish blocked on a slow subscriber")
	}
	var last uint64
	for e := range live {
		last = e.Seq
	}
	if last != 2 || b.CutOff() != 1 || b.Subscribers() != 0 {
		t.Fatalf("slow subscriber saw up to %d, cut off %d, subscribers %d; want 2, 1, 0", last, b.CutOff(), b.Subscribers())
	}
	history, _, cancel2 := b.Subscribe(last, 16)
	defer cancel2()
	if len(history) != 8 || history[0].Seq != 3 {
		t.Errorf("resumed history = %d events from %d; want 8 from 3", len(history), history[0].Seq)
	}
}

func TestBusConcurrentPublishAndCancel(t *testing.T) {
	b := NewBus(50)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 200 {
				b.Publish(api.Event{Kind: "k", Pod: fmt.Sprint(i)})
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				_, live, cancel := b.Subscribe(0, 8)
				<-time.After(time.Millisecond)
				cancel()
				cancel() // twice is harmless
				for range live {
				}
			}
		}()
	}
	wg.Wait()
	if got := b.Recent(); len(got) != 50 || got[49].Seq != 800 {
		t.Errorf("after 800 events: %d retained, last seq %d", len(got), got[len(got)-1].Seq)
	}
	if b.Subscribers() != 0 {
		t.Errorf("%d subscriptions left open", b.Subscribers())
	}
}

func TestLabPublishWithoutBus(t *testing.T) {
	var l Lab
	l.publish("k", "", "nobody listens", nil) // must not panic
	l.bus = NewBus(4)
	l.publish(EventPodCreated, "p", "made", map[string]any{"ip": "10.0.0.1"})
	if got := l.bus.Recent(); len(got) != 1 || got[0].Kind != EventPodCreated || got[0].Pod != "p" {
		t.Errorf("published %+v", got)
	}
}

func TestPodOfNode(t *testing.T) {
	for id, want := range map[string]string{
		"sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local": "backend-v1",
		"router~10.0.0.1~gw.istio-system~istio-system.svc.cluster.local":  "gw",
		"not-a-node-id": "",
	} {
		if got := podOfNode(id); got != want {
			t.Errorf("podOfNode(%q) = %q, want %q", id, got, want)
		}
	}
}
