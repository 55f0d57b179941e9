package discovery

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// Message sizes. A state-of-the-world response carries every resource of its type for
// one proxy in one gRPC message, so its size grows with the config; gRPC's default limit
// (4 MiB) is what took every proxy down when a large VirtualService was applied. The
// control plane refuses a config whose push would exceed MaxPushBytes, and both ends
// accept MaxMessageBytes, twice that, so whatever the control plane sends is received.
const (
	// MaxPushBytes is the most one proxy's resources of one type may weigh: Update
	// refuses (naming the proxy, type and largest resources) a config above it.
	MaxPushBytes = 32 << 20
	// MaxMessageBytes is the gRPC message size the server sends and the proxies'
	// xDS clients receive (dataplane/proxy/xdsclient uses the same value).
	MaxMessageBytes = 2 * MaxPushBytes
	// MaxRequestBytes is the largest request a proxy may send (resource names, a
	// NACK's error detail); Envoy's are far smaller.
	MaxRequestBytes = 4 << 20
)

// responseOverhead bounds the bytes a response adds per resource (the Any's type URL and
// the field tags) and per message (version, nonce, type URL).
const (
	perResourceOverhead = 128
	perMessageOverhead  = 512
)

// PushTooLargeError is Update's refusal of a config whose push would exceed the server's
// limit (MaxPushBytes unless Options.MaxPushBytes says otherwise).
// Its message leaves the proxy to the caller, which names it.
type PushTooLargeError struct {
	NodeID  string
	TypeURL string
	Bytes   int
	Limit   int // the limit it is above
	// Largest names the heaviest resources of the type, heaviest first, with sizes.
	Largest []string
	// Origin is the config path of the object that made the heaviest part of them (the
	// VirtualService of the largest virtual host), when the resources record one.
	Origin string
}

func (e *PushTooLargeError) Error() string {
	from := ""
	if e.Origin != "" {
		from = ", most of it from " + e.Origin
	}
	return fmt.Sprintf("its %s resources would weigh %d bytes, above the %d-byte limit of one xDS push (largest: %s%s)",
		shortType(e.TypeURL), e.Bytes, e.Limit, strings.Join(e.Largest, ", "), from)
}

// largestOrigin returns the config path recorded on the routes of the largest virtual
// host of rs (RouteConfigurations), or "".
func largestOrigin(rs []types.Resource) string {
	var (
		best     *routev3.VirtualHost
		bestSize int
	)
	for _, r := range rs {
		rc, ok := r.(*routev3.RouteConfiguration)
		if !ok {
			continue
		}
		for _, vh := range rc.GetVirtualHosts() {
			if n := proto.Size(vh); n > bestSize {
				best, bestSize = vh, n
			}
		}
	}
	for _, rt := range best.GetRoutes() {
		if p := rt.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue(); p != "" {
			return p
		}
	}
	return ""
}

// checkPushSize returns a *PushTooLargeError when one type of res would weigh more than
// limit bytes in one response to the proxy.
func checkPushSize(nodeID string, res map[resource.Type][]types.Resource, limit int) error {
	for _, typ := range slices.Sorted(maps.Keys(res)) {
		type sized struct {
			name  string
			bytes int
		}
		total := perMessageOverhead
		var all []sized
		for _, r := range res[typ] {
			n := proto.Size(r) + perResourceOverhead
			total += n
			all = append(all, sized{cachev3.GetResourceName(r), n})
		}
		if total <= limit {
			continue
		}
		slices.SortFunc(all, func(a, b sized) int { return b.bytes - a.bytes })
		e := &PushTooLargeError{NodeID: nodeID, TypeURL: typ, Bytes: total, Limit: limit}
		for _, s := range all[:min(3, len(all))] {
			e.Largest = append(e.Largest, fmt.Sprintf("%s (%d bytes)", s.name, s.bytes))
		}
		e.Origin = largestOrigin(res[typ])
		return e
	}
	return nil
}

// shortType is the last element of a type URL ("RouteConfiguration").
func shortType(typeURL string) string {
	for i := len(typeURL) - 1; i >= 0; i-- {
		if typeURL[i] == '.' || typeURL[i] == '/' {
			return typeURL[i+1:]
		}
	}
	return typeURL
}
