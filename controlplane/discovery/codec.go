package discovery

import (
	"fmt"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// pushCodec is gRPC's proto codec with the buffers of the messages it encodes taken
// from a pool whose sizes double from 256 bytes to 32 MiB. gRPC's own codec takes them
// from its default pool, whose tiers jump from 32 KiB to 1 MiB: every response of
// 32 KiB to 1 MiB (a proxy's clusters or endpoints at 100 services) held a 1 MiB buffer
// until its stream wrote it, so a push to 1000 proxies held gigabytes. Here a buffer is
// at most twice its message. The server forces it (grpc.ForceServerCodecV2); requests
// decode as with gRPC's codec.
//
// A SotW DiscoveryResponse is not copied into a buffer at all (encodeResponse): its
// resources' encodings are the interner's, shared by every proxy and version
// (sotwcache.go), so the encoded response is a few bytes of framing per resource
// followed by references to those shared bytes, which gRPC's transport reads straight
// into its frames. A push of 150 KB to each of 1000 proxies used to copy (and hold
// until written) 150 MB; now it holds about 5 KB per proxy.
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

// Marshal encodes v: a DiscoveryResponse by encodeResponse, anything else into one
// buffer of the codec's pool (or, when small, a plain slice, as gRPC's codec does).
func (c pushCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*discoverypb.DiscoveryResponse); ok {
		if data, ok, err := encodeResponse(r); ok || err != nil {
			return data, err
		}
	}
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

// sharedValueMin is the size from which encodeResponse refers to a resource's encoding
// instead of copying it: below it a reference costs about what the bytes do.
const sharedValueMin = 256

// encodeResponse encodes r as proto.Marshal does, byte for byte, without copying its
// resources' values: the result is the response's own fields and each resource's
// framing (its Any's tag, length and type URL) in one small buffer, interleaved with
// the resources' values themselves (read-only, never freed, so shared safely with other
// responses and the interner). ok is false when r has what this does not encode (an
// Any with unknown fields, a nil resource); the caller then marshals it whole.
func encodeResponse(r *discoverypb.DiscoveryResponse) (data mem.BufferSlice, ok bool, err error) {
	// r's fields other than version_info (1) and resources (2), encoded after them in
	// field order as proto.Marshal orders them.
	rest := &discoverypb.DiscoveryResponse{}
	rm, rr := r.ProtoReflect(), rest.ProtoReflect()
	rm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if n := fd.Number(); n != 1 && n != 2 {
			rr.Set(fd, v)
		}
		return true
	})
	rr.SetUnknown(rm.GetUnknown())

	type ref struct {
		at    int // where in head the value goes
		value []byte
	}
	var refs []ref
	head := make([]byte, 0, 64+80*len(r.GetResources()))
	if v := r.GetVersionInfo(); v != "" {
		head = protowire.AppendTag(head, 1, protowire.BytesType)
		head = protowire.AppendString(head, v)
	}
	for _, a := range r.GetResources() {
		if a == nil || len(a.ProtoReflect().GetUnknown()) > 0 {
			return nil, false, nil
		}
		url, value := a.GetTypeUrl(), a.GetValue()
		size := 0
		if url != "" {
			size += protowire.SizeTag(1) + protowire.SizeBytes(len(url))
		}
		if len(value) > 0 {
			size += protowire.SizeTag(2) + protowire.SizeBytes(len(value))
		}
		head = protowire.AppendTag(head, 2, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(size))
		if url != "" {
			head = protowire.AppendTag(head, 1, protowire.BytesType)
			head = protowire.AppendString(head, url)
		}
		if len(value) == 0 {
			continue
		}
		head = protowire.AppendTag(head, 2, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(len(value)))
		if len(value) < sharedValueMin {
			head = append(head, value...)
			continue
		}
		refs = append(refs, ref{len(head), value})
	}
	head, err = proto.MarshalOptions{}.MarshalAppend(head, rest)
	if err != nil {
		return nil, true, err
	}
	data = make(mem.BufferSlice, 0, 2*len(refs)+1)
	from := 0
	for _, rf := range refs {
		if rf.at > from {
			data = append(data, mem.SliceBuffer(head[from:rf.at]))
		}
		data = append(data, mem.SliceBuffer(rf.value))
		from = rf.at
	}
	if from < len(head) {
		data = append(data, mem.SliceBuffer(head[from:]))
	}
	return data, true, nil
}
