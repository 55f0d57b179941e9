package hotrestart

import (
	"reflect"
	"testing"
)

// FuzzUnmarshal checks that the decoder never panics and that what it accepts
// re-encodes to something that decodes to the same message.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range []Message{
		{Request: &Request{Kind: KindPassListenSocket, Address: "tcp://127.0.0.1:80"}},
		{Request: &Request{Kind: KindStats}},
		{Reply: &Reply{Kind: KindPassListenSocket, FD: -1}},
		{Reply: &Reply{Kind: KindStats, Stats: &Stats{CounterDeltas: map[string]uint64{"a": 1}, Gauges: map[string]uint64{"b": 2}}}},
		{DidntRecognizeLastMesg: true},
	} {
		f.Add(Marshal(&m))
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			return
		}
		again, err := Unmarshal(Marshal(m))
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(m), normal(again)) {
			t.Fatalf("round trip changed the message: %+v vs %+v", m, again)
		}
	})
}

// normal drops what the encoding does not distinguish: kind-less requests and replies,
// empty maps.
func normal(m *Message) Message {
	out := *m
	if out.Request != nil && out.Request.Kind == KindNone {
		out.Request = nil
	}
	if out.Reply != nil {
		r := *out.Reply
		if r.Kind == KindNone {
			out.Reply = nil
		} else {
			if r.Stats != nil && len(r.Stats.CounterDeltas)+len(r.Stats.Gauges) == 0 && r.Stats.MemoryAllocated == 0 && r.Stats.NumConnections == 0 {
				r.Stats = nil
			}
			out.Reply = &r
		}
	}
	return out
}
