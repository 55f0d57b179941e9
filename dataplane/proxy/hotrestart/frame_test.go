package hotrestart

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestFrameChunksAndAssemblerRebuilds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		size      int
		datagrams int
	}{
		{name: "empty message is just the length", size: 0, datagrams: 1},
		{name: "small message fits one datagram", size: 100, datagrams: 1},
		{name: "exactly one full datagram", size: MaxDatagram - 8, datagrams: 1},
		{name: "one byte more needs a second datagram", size: MaxDatagram - 7, datagrams: 2},
		{name: "large stats reply spans many datagrams", size: 3*MaxDatagram + 5, datagrams: 4},
	} {
		payload := bytes.Repeat([]byte{0xab}, tc.size)
		frames := Frame(payload)
		if len(frames) != tc.datagrams {
			t.Errorf("%s: %d datagrams, want %d", tc.name, len(frames), tc.datagrams)
		}
		if got := binary.BigEndian.Uint64(frames[0]); got != uint64(tc.size) {
			t.Errorf("%s: length prefix %d, want %d (big-endian)", tc.name, got, tc.size)
		}
		var a Assembler
		for i, d := range frames {
			if len(d) > MaxDatagram {
				t.Errorf("%s: datagram %d has %d bytes", tc.name, i, len(d))
			}
			out, done, err := a.Add(d)
			if err != nil {
				t.Fatalf("%s: datagram %d: %v", tc.name, i, err)
			}
			if done != (i == len(frames)-1) {
				t.Fatalf("%s: datagram %d: done=%v", tc.name, i, done)
			}
			if done && !bytes.Equal(out, payload) {
				t.Errorf("%s: reassembled %d bytes, want %d", tc.name, len(out), len(payload))
			}
		}
	}
}

func TestAssemblerRejectsBadDatagrams(t *testing.T) {
	t.Parallel()
	var a Assembler
	if _, _, err := a.Add([]byte{1, 2, 3}); err == nil {
		t.Error("a datagram shorter than the length prefix was accepted")
	}
	huge := make([]byte, 8)
	binary.BigEndian.PutUint64(huge, 1<<40)
	if _, _, err := a.Add(huge); err == nil {
		t.Error("a length of 1 TiB was accepted")
	}
	over := Frame([]byte("abc"))[0]
	over = append(over, 'x')
	if _, _, err := a.Add(over); err == nil {
		t.Error("a datagram running past its message was accepted")
	}
	// After an error the next datagram starts a new message.
	out, done, err := a.Add(Frame([]byte("ok"))[0])
	if err != nil || !done || string(out) != "ok" {
		t.Errorf("after errors: %q %v %v", out, done, err)
	}
}
