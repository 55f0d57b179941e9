package hotrestart

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxDatagram is the largest datagram sent, as Envoy's MaxSendmsgSize.
const MaxDatagram = 4096

// maxMessage bounds a reassembled message so a bad length prefix cannot make the
// receiver allocate without limit.
const maxMessage = 64 << 20

const lengthPrefix = 8

// Frame returns the datagrams that carry payload: an 8-byte big-endian length and the
// payload, cut into pieces of at most MaxDatagram bytes.
func Frame(payload []byte) [][]byte {
	stream := make([]byte, lengthPrefix+len(payload))
	binary.BigEndian.PutUint64(stream, uint64(len(payload)))
	copy(stream[lengthPrefix:], payload)
	var out [][]byte
	for len(stream) > 0 {
		n := min(len(stream), MaxDatagram)
		out = append(out, stream[:n])
		stream = stream[n:]
	}
	return out
}

// Assembler rebuilds messages from datagrams. A message always starts a new datagram.
// The zero value is ready to use; it is not safe for concurrent use.
type Assembler struct {
	want int
	buf  []byte
}

// Add takes the next datagram. It returns the payload and true when a message is
// complete; an error means the datagram cannot start or continue a message, and the
// partial message is dropped.
func (a *Assembler) Add(d []byte) ([]byte, bool, error) {
	if a.buf == nil {
		if len(d) < lengthPrefix {
			return nil, false, fmt.Errorf("read message: datagram of %d bytes is shorter than the length prefix", len(d))
		}
		n := binary.BigEndian.Uint64(d)
		if n > maxMessage {
			return nil, false, fmt.Errorf("read message: length %d exceeds %d", n, maxMessage)
		}
		a.want = int(n)
		a.buf = make([]byte, 0, a.want)
		d = d[lengthPrefix:]
	}
	if len(a.buf)+len(d) > a.want {
		a.Reset()
		return nil, false, errors.New("read message: datagram runs past the message length")
	}
	a.buf = append(a.buf, d...)
	if len(a.buf) < a.want {
		return nil, false, nil
	}
	out := a.buf
	a.Reset()
	return out, true, nil
}

// Reset drops a partial message.
func (a *Assembler) Reset() { a.buf, a.want = nil, 0 }
