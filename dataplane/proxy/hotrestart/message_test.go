package hotrestart

import (
	"encoding/hex"
	"reflect"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		msg  Message
	}{
		{name: "pass_listen_socket request carries the address", msg: Message{Request: &Request{Kind: KindPassListenSocket, Address: "tcp://127.0.0.1:15001"}}},
		{name: "shutdown_admin request", msg: Message{Request: &Request{Kind: KindShutdownAdmin}}},
		{name: "stats request", msg: Message{Request: &Request{Kind: KindStats}}},
		{name: "drain_listeners request", msg: Message{Request: &Request{Kind: KindDrainListeners}}},
		{name: "terminate request", msg: Message{Request: &Request{Kind: KindTerminate}}},
		{name: "pass_listen_socket reply with an fd", msg: Message{Reply: &Reply{Kind: KindPassListenSocket, FD: 7}}},
		{name: "pass_listen_socket reply with -1 means bind yourself", msg: Message{Reply: &Reply{Kind: KindPassListenSocket, FD: -1}}},
		{name: "shutdown_admin reply carries the first start time", msg: Message{Reply: &Reply{Kind: KindShutdownAdmin, OriginalStartTimeUnixSeconds: 1700000000}}},
		{name: "stats reply carries deltas and gauges", msg: Message{Reply: &Reply{Kind: KindStats, Stats: &Stats{
			MemoryAllocated: 5, NumConnections: 2,
			CounterDeltas: map[string]uint64{"http.x.downstream_rq_total": 10, "cluster.a.upstream_rq_200": 3},
			Gauges:        map[string]uint64{"server.hot_restart_generation": 2},
		}}}},
		{name: "didnt_recognize_your_last_message", msg: Message{DidntRecognizeLastMesg: true}},
	} {
		got, err := Unmarshal(Marshal(&tc.msg))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s := got.Reply.GetStats(); s != nil && tc.msg.Reply.Stats != nil {
			// Decoding always makes the maps.
			if len(s.CounterDeltas) == 0 {
				s.CounterDeltas = tc.msg.Reply.Stats.CounterDeltas
			}
		}
		if !reflect.DeepEqual(*got, tc.msg) {
			t.Errorf("%s: round trip = %+v, want %+v", tc.name, got, tc.msg)
		}
	}
}

// GetStats returns r.Stats, nil-safe.
func (r *Reply) GetStats() *Stats {
	if r == nil {
		return nil
	}
	return r.Stats
}

func TestMessageUsesEnvoysFieldNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		msg  Message
		hex  string
	}{
		// request=1 { pass_listen_socket=1 { address=1 "tcp://a" } }
		{name: "request.pass_listen_socket.address", msg: Message{Request: &Request{Kind: KindPassListenSocket, Address: "tcp://a"}}, hex: "0a0b0a090a077463703a2f2f61"},
		// request=1 { terminate=5 {} }
		{name: "request.terminate", msg: Message{Request: &Request{Kind: KindTerminate}}, hex: "0a022a00"},
		// reply=2 { shutdown_admin=2 { original_start_time_unix_seconds=1: 300 } }
		{name: "reply.shutdown_admin", msg: Message{Reply: &Reply{Kind: KindShutdownAdmin, OriginalStartTimeUnixSeconds: 300}}, hex: "12051203 08ac02"},
		// reply=2 { stats=3 { counter_deltas=3 { key "c" value 1 } gauges=4 { key "g" value 2 } } }
		{name: "reply.stats maps", msg: Message{Reply: &Reply{Kind: KindStats, Stats: &Stats{CounterDeltas: map[string]uint64{"c": 1}, Gauges: map[string]uint64{"g": 2}}}}, hex: "12101a0e1a050a016310012205 0a01671002"},
		// didnt_recognize_your_last_message=3: true
		{name: "didnt_recognize_your_last_message", msg: Message{DidntRecognizeLastMesg: true}, hex: "1801"},
	} {
		want := ""
		for _, c := range tc.hex {
			if c != ' ' {
				want += string(c)
			}
		}
		if got := hex.EncodeToString(Marshal(&tc.msg)); got != want {
			t.Errorf("%s: encoded %s, want %s", tc.name, got, want)
		}
	}
}

func TestUnmarshalKeepsUnknownKindsAndSkipsUnknownFields(t *testing.T) {
	t.Parallel()
	// request=1 { test_connection=9 {} } plus an unknown top-level varint field 15.
	b, _ := hex.DecodeString("0a024a007801")
	m, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Request == nil || m.Request.Kind != 9 {
		t.Errorf("unknown request kind lost: %+v", m.Request)
	}
	if _, err := Unmarshal([]byte{0x0a, 0x05, 0x01}); err == nil {
		t.Error("a truncated message decoded without error")
	}
}
