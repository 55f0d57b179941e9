package hotrestart

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// Kind names a request or reply in envoy.HotRestartMessage's oneofs; its value is the
// field number in both Request and Reply.
type Kind int

// Message kinds, numbered as in hot_restart.proto.
const (
	KindNone             Kind = 0
	KindPassListenSocket Kind = 1
	KindShutdownAdmin    Kind = 2
	KindStats            Kind = 3
	KindDrainListeners   Kind = 4
	KindTerminate        Kind = 5
)

// String returns the proto field name of the kind.
func (k Kind) String() string {
	switch k {
	case KindPassListenSocket:
		return "pass_listen_socket"
	case KindShutdownAdmin:
		return "shutdown_admin"
	case KindStats:
		return "stats"
	case KindDrainListeners:
		return "drain_listeners"
	case KindTerminate:
		return "terminate"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Message is envoy.HotRestartMessage: a request, a reply, or the flag saying the last
// message was not understood.
type Message struct {
	Request                *Request
	Reply                  *Reply
	DidntRecognizeLastMesg bool
}

// Request is HotRestartMessage.Request. Address is set for pass_listen_socket
// ("tcp://127.0.0.1:80").
type Request struct {
	Kind    Kind
	Address string
}

// Reply is HotRestartMessage.Reply. FD is pass_listen_socket's (-1: none; the fd itself
// travels as SCM_RIGHTS); OriginalStartTimeUnixSeconds is shutdown_admin's; Stats is
// stats'.
type Reply struct {
	Kind                         Kind
	FD                           int32
	OriginalStartTimeUnixSeconds uint64
	Stats                        *Stats
}

// Stats is HotRestartMessage.Reply.Stats: counters as deltas since the previous reply,
// gauges as current values.
type Stats struct {
	MemoryAllocated uint64
	NumConnections  uint64
	CounterDeltas   map[string]uint64
	Gauges          map[string]uint64
}

// Field numbers of hot_restart.proto.
const (
	fMsgRequest        = 1
	fMsgReply          = 2
	fMsgDidntRecognize = 3

	fPassAddress = 1 // Request.PassListenSocket.address
	fPassFD      = 1 // Reply.PassListenSocket.fd
	fStartTime   = 1 // Reply.ShutdownAdmin.original_start_time_unix_seconds

	fStatsMemory   = 1
	fStatsConns    = 2
	fStatsCounters = 3
	fStatsGauges   = 4

	fMapKey   = 1
	fMapValue = 2
)

// Marshal encodes m in protobuf wire format. Map entries are written in key order so
// the encoding is deterministic.
func Marshal(m *Message) []byte {
	var b []byte
	switch {
	case m.Request != nil:
		b = protowire.AppendTag(b, fMsgRequest, protowire.BytesType)
		b = protowire.AppendBytes(b, marshalRequest(m.Request))
	case m.Reply != nil:
		b = protowire.AppendTag(b, fMsgReply, protowire.BytesType)
		b = protowire.AppendBytes(b, marshalReply(m.Reply))
	}
	if m.DidntRecognizeLastMesg {
		b = protowire.AppendTag(b, fMsgDidntRecognize, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

func marshalRequest(r *Request) []byte {
	var inner []byte
	if r.Kind == KindPassListenSocket && r.Address != "" {
		inner = protowire.AppendTag(inner, fPassAddress, protowire.BytesType)
		inner = protowire.AppendString(inner, r.Address)
	}
	return appendSub(nil, r.Kind, inner)
}

func marshalReply(r *Reply) []byte {
	var inner []byte
	switch r.Kind {
	case KindPassListenSocket:
		if r.FD != 0 {
			inner = protowire.AppendTag(inner, fPassFD, protowire.VarintType)
			inner = protowire.AppendVarint(inner, uint64(int64(r.FD)))
		}
	case KindShutdownAdmin:
		if r.OriginalStartTimeUnixSeconds != 0 {
			inner = protowire.AppendTag(inner, fStartTime, protowire.VarintType)
			inner = protowire.AppendVarint(inner, r.OriginalStartTimeUnixSeconds)
		}
	case KindStats:
		inner = marshalStats(r.Stats)
	}
	return appendSub(nil, r.Kind, inner)
}

func appendSub(b []byte, k Kind, inner []byte) []byte {
	if k == KindNone {
		return b
	}
	b = protowire.AppendTag(b, protowire.Number(k), protowire.BytesType)
	return protowire.AppendBytes(b, inner)
}

func marshalStats(s *Stats) []byte {
	if s == nil {
		return nil
	}
	var b []byte
	if s.MemoryAllocated != 0 {
		b = protowire.AppendTag(b, fStatsMemory, protowire.VarintType)
		b = protowire.AppendVarint(b, s.MemoryAllocated)
	}
	if s.NumConnections != 0 {
		b = protowire.AppendTag(b, fStatsConns, protowire.VarintType)
		b = protowire.AppendVarint(b, s.NumConnections)
	}
	b = appendMap(b, fStatsCounters, s.CounterDeltas)
	return appendMap(b, fStatsGauges, s.Gauges)
}

func appendMap(b []byte, num protowire.Number, m map[string]uint64) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var e []byte
		e = protowire.AppendTag(e, fMapKey, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, fMapValue, protowire.VarintType)
		e = protowire.AppendVarint(e, m[k])
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}

// errBadWire is wrapped by every decoding error.
var errBadWire = errors.New("malformed HotRestartMessage")

// Unmarshal decodes a HotRestartMessage. Unknown fields are skipped, as protobuf does; a
// request or reply of an unknown kind decodes with that kind so the receiver can answer
// didnt_recognize_your_last_message.
func Unmarshal(b []byte) (*Message, error) {
	m := &Message{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == fMsgRequest && typ == protowire.BytesType:
			r, err := unmarshalRequest(v)
			if err != nil {
				return err
			}
			m.Request, m.Reply = r, nil
		case num == fMsgReply && typ == protowire.BytesType:
			r, err := unmarshalReply(v)
			if err != nil {
				return err
			}
			m.Reply, m.Request = r, nil
		case num == fMsgDidntRecognize && typ == protowire.VarintType:
			m.DidntRecognizeLastMesg = x != 0
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func unmarshalRequest(b []byte) (*Request, error) {
	r := &Request{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		r.Kind, r.Address = Kind(num), ""
		if r.Kind != KindPassListenSocket {
			return nil
		}
		return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num == fPassAddress && typ == protowire.BytesType {
				r.Address = string(v)
			}
			return nil
		})
	})
	return r, err
}

func unmarshalReply(b []byte) (*Reply, error) {
	r := &Reply{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		*r = Reply{Kind: Kind(num)}
		switch r.Kind {
		case KindPassListenSocket:
			return fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == fPassFD && typ == protowire.VarintType {
					r.FD = int32(x)
				}
				return nil
			})
		case KindShutdownAdmin:
			return fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
				if num == fStartTime && typ == protowire.VarintType {
					r.OriginalStartTimeUnixSeconds = x
				}
				return nil
			})
		case KindStats:
			s, err := unmarshalStats(v)
			r.Stats = s
			return err
		}
		return nil
	})
	return r, err
}

func unmarshalStats(b []byte) (*Stats, error) {
	s := &Stats{CounterDeltas: map[string]uint64{}, Gauges: map[string]uint64{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == fStatsMemory && typ == protowire.VarintType:
			s.MemoryAllocated = x
		case num == fStatsConns && typ == protowire.VarintType:
			s.NumConnections = x
		case num == fStatsCounters && typ == protowire.BytesType:
			return mapEntry(v, s.CounterDeltas)
		case num == fStatsGauges && typ == protowire.BytesType:
			return mapEntry(v, s.Gauges)
		}
		return nil
	})
	return s, err
}

func mapEntry(b []byte, into map[string]uint64) error {
	var key string
	var val uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == fMapKey && typ == protowire.BytesType:
			key = string(v)
		case num == fMapValue && typ == protowire.VarintType:
			val = x
		}
		return nil
	})
	if err != nil {
		return err
	}
	into[key] = val
	return nil
}

// fields calls fn for each field of a message: v holds a length-delimited value, x a
// varint or fixed value.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadWire, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %w", errBadWire, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
