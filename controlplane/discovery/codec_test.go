package discovery

import (
	"bytes"
	"testing"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
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
