package discovery

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// pushCodec is gRPC's proto codec with the buffers of the messages it encodes taken
// from a pool whose sizes double from 256 bytes to 32 MiB. gRPC's own codec takes them
// from its default pool, whose tiers jump from 32 KiB to 1 MiB: every response of
// 32 KiB to 1 MiB (a proxy's clusters or endpoints at 100 services) held a 1 MiB buffer
// until its stream wrote it, so a push to 1000 proxies held gigabytes. Here a buffer is
// at most twice its message. The server forces it (grpc.ForceServerCodecV2); requests
// decode as with gRPC's codec.
type pushCodec struct{ pool mem.BufferPool }

var _ encoding.CodecV2 = pushCodec{}

func newPushCodec() (pushCodec, error) {
	var exps []uint8
	for e := uint8(8); e <= 25; e++ {
		exps = append(exps, e)
	}
	pool, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		return pushCodec{}, fmt.Errorf("xds push buffers: %w", err)
	}
	return pushCodec{pool: pool}, nil
}

// Marshal encodes v into one buffer of the codec's pool (or, when small, a plain slice,
// as gRPC's codec does).
func (c pushCodec) Marshal(v any) (mem.BufferSlice, error) {
	msg, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto: marshal %T: not a proto.Message", v)
	}
	size := proto.Size(msg)
	opts := proto.MarshalOptions{UseCachedSize: true} // the size just computed
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(msg)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], msg); err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

// Unmarshal decodes data into v.
func (c pushCodec) Unmarshal(data mem.BufferSlice, v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto: unmarshal into %T: not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), msg)
}

// Name is gRPC's proto codec's, so that clients' content-subtype "proto" selects it.
func (pushCodec) Name() string { return "proto" }
