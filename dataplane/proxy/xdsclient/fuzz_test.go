package xdsclient

import (
	"errors"
	"log/slog"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzHandleResponse feeds DiscoveryResponse bytes to the client's response path: every
// response is answered on its type with its nonce; it is ACKed with its version when the
// handler applies it and NACKed with the last applied version otherwise, as Envoy does.
func FuzzHandleResponse(f *testing.F) {
	for _, typeURL := range typeOrder {
		b, err := proto.Marshal(&discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: "1", Nonce: "n"})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	bad, _ := proto.Marshal(&discoveryv3.DiscoveryResponse{TypeUrl: ClusterType, VersionInfo: "2", Nonce: "m",
		Resources: []*anypb.Any{{TypeUrl: ListenerType}}})
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		var resp discoveryv3.DiscoveryResponse
		if proto.Unmarshal(data, &resp) != nil {
			t.Skip()
		}
		// The handler refuses responses with an odd number of resources, to exercise
		// both answers.
		c := New(Options{Logger: slog.New(slog.DiscardHandler), Wildcard: []string{ClusterType, ListenerType},
			Handler: handlerFunc(func(_, _ string, res []*anypb.Any) error {
				if len(res)%2 == 1 {
					return errors.New("odd")
				}
				return nil
			})})
		c.Subscribe(EndpointType, []string{"a"})
		before := c.Version(resp.GetTypeUrl())
		req := c.handle(&resp)
		if req.GetTypeUrl() != resp.GetTypeUrl() || req.GetResponseNonce() != resp.GetNonce() {
			t.Fatalf("answer %v does not echo type and nonce of %v", req, &resp)
		}
		nack := c.validateTypes(&resp) != nil || len(resp.GetResources())%2 == 1
		switch {
		case nack && (req.GetErrorDetail() == nil || req.GetVersionInfo() != before):
			t.Fatalf("want a NACK with the last version %q, got %v", before, req)
		case !nack && (req.GetErrorDetail() != nil || req.GetVersionInfo() != resp.GetVersionInfo()):
			t.Fatalf("want an ACK of %q, got %v", resp.GetVersionInfo(), req)
		}
	})
}
