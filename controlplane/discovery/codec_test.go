package discovery

import (
	"bytes"
	"testing"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestPushCodecBuffersFitMessages checks that a response of 100-600 KiB (a proxy's
// clusters or endpoints at 100 services) is encoded into a buffer at most twice its
// size, where gRPC's default pool hands out 1 MiB, and that it decodes back equal.
func TestPushCodecBuffersFitMessages(t *testing.T) {
	t.Parallel()
	c, err := newPushCodec()
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{100 << 10, 161 << 10, 600 << 10} {
		buf := c.pool.Get(size)
		if n := cap(*buf); n < size || n > 2*size {
			t.Errorf("buffer for %d bytes: capacity %d, want %d to %d", size, n, size, 2*size)
		}
		c.pool.Put(buf)
		if def := mem.DefaultBufferPool().Get(size); cap(*def) <= 2*size {
			t.Logf("gRPC's default pool now gives %d bytes for %d: pushCodec may no longer be needed", cap(*def), size)
		}
		resp := &discoverypb.DiscoveryResponse{VersionInfo: "v1", TypeUrl: "t",
			Resources: []*anypb.Any{{TypeUrl: "t", Value: bytes.Repeat([]byte{7}, size)}}}
		data, err := c.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if data.Len() != proto.Size(resp) {
			t.Errorf("encoded %d bytes, want %d", data.Len(), proto.Size(resp))
		}
		got := &discoverypb.DiscoveryResponse{}
		if err := c.Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		data.Free()
		if !proto.Equal(got, resp) {
			t.Errorf("response of %d bytes did not decode back equal", size)
		}
	}
}

// TestPushCodecSharesResourceEncodings checks that a DiscoveryResponse encodes exactly
// as proto.Marshal encodes it, and that the value of each resource of sharedValueMin
// bytes or more is referred to by the encoding, not copied: the push to every proxy
// carries the interner's one copy.
func TestPushCodecSharesResourceEncodings(t *testing.T) {
	t.Parallel()
	c, err := newPushCodec()
	if err != nil {
		t.Fatal(err)
	}
	big := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	withUnknown := &anypb.Any{TypeUrl: "u", Value: big(3, 300)}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
	for _, tc := range []struct {
		name   string
		resp   *discoverypb.DiscoveryResponse
		shared int // values the encoding must refer to
	}{
		{name: "empty", resp: &discoverypb.DiscoveryResponse{}},
		{name: "no resources", resp: &discoverypb.DiscoveryResponse{VersionInfo: "v3", TypeUrl: "t", Nonce: "7"}},
		{name: "mixed sizes and fields", shared: 3, resp: &discoverypb.DiscoveryResponse{
			VersionInfo: "v12", TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Nonce: "42", Canary: true,
			ControlPlane: &corepb.ControlPlane{Identifier: "meshlab"},
			Resources: []*anypb.Any{
				{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Value: big(1, 300)},
				{TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Value: big(2, 10)},
				{TypeUrl: "", Value: big(4, 70000)},
				{TypeUrl: "only-url"},
				{},
				{TypeUrl: "t", Value: big(5, sharedValueMin)},
				{TypeUrl: "t", Value: big(6, sharedValueMin-1)},
			},
		}},
		{name: "any with unknown fields falls back to a copy", resp: &discoverypb.DiscoveryResponse{
			VersionInfo: "v1", Resources: []*anypb.Any{withUnknown},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, err := proto.Marshal(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			data, err := c.Marshal(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			defer data.Free()
			if got := data.Materialize(); !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from proto.Marshal's:\ngot  %x\nwant %x", got, want)
			}
			shared := 0
			for _, a := range tc.resp.GetResources() {
				for _, b := range data {
					if d := b.ReadOnlyData(); len(d) > 0 && len(a.GetValue()) > 0 && &d[0] == &a.GetValue()[0] {
						shared++
					}
				}
			}
			if shared != tc.shared {
				t.Errorf("encoding refers to %d resource values, want %d", shared, tc.shared)
			}
		})
	}
}
