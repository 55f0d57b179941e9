package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	internalv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// InternalUpstreamName is the transport socket that passes metadata to internal listeners.
const InternalUpstreamName = "envoy.transport_sockets.internal_upstream"

var internalUpstreamAllow = fieldcheck.Allow{
	"envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport":                     {"passthrough_metadata", "transport_socket"},
	"envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport.MetadataValueSource": {"kind", "name"},
	"envoy.type.metadata.v3.MetadataKind":                                                                   {"host", "cluster"},
	"envoy.type.metadata.v3.MetadataKind.Host":                                                              {},
	"envoy.type.metadata.v3.MetadataKind.Cluster":                                                           {},
	"envoy.config.core.v3.TransportSocket":                                                                  {"name", "typed_config"},
}

// compileInternalUpstream reads an internal_upstream transport socket: its passthrough
// metadata and the transport socket it wraps. It returns nil, nil, nil for any other
// transport socket. Errors name the field relative to transport_socket.
func compileInternalUpstream(ts *corev3.TransportSocket) (*Passthrough, *corev3.TransportSocket, error) {
	a := ts.GetTypedConfig()
	if a == nil || a.MessageName() != "envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport" {
		return nil, nil, nil
	}
	var iu internalv3.InternalUpstreamTransport
	if err := a.UnmarshalTo(&iu); err != nil {
		return nil, nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := iu.ValidateAll(); err != nil {
		return nil, nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := internalUpstreamAllow.Check(&iu); err != nil {
		return nil, nil, fmt.Errorf("typed_config.%w", err)
	}
	pt := &Passthrough{}
	for i, src := range iu.GetPassthroughMetadata() {
		switch {
		case src.GetKind().GetHost() != nil:
			pt.Host = append(pt.Host, src.GetName())
		case src.GetKind().GetCluster() != nil:
			pt.Cluster = append(pt.Cluster, src.GetName())
		default:
			return nil, nil, fmt.Errorf("typed_config.passthrough_metadata[%d].kind: only host and cluster are supported by meshlab proxy", i)
		}
	}
	return pt, iu.GetTransportSocket(), nil
}

// passthroughMetadata is the dynamic metadata an internal connection to h carries: the
// namespaces named by the cluster's passthrough_metadata, from the host's and the
// cluster's filter_metadata (the host's first, as Envoy applies them in order).
func (c *Cluster) passthroughMetadata(h Host) map[string]*structpb.Struct {
	pt := c.cfg.passthroughFor(h) // hbone_sidecar.go
	if pt == nil {
		return nil
	}
	out := map[string]*structpb.Struct{}
	for _, ns := range pt.Cluster {
		if v := c.cfg.Metadata[ns]; v != nil {
			out[ns] = v
		}
	}
	for _, ns := range pt.Host {
		if v := h.Metadata.GetFilterMetadata()[ns]; v != nil {
			out[ns] = v
		}
	}
	return out
}

// dialInternal connects to the internal listener h names.
func (c *Cluster) dialInternal(ctx context.Context, h Host) (net.Conn, error) {
	if c.internal == nil {
		return nil, fmt.Errorf("%s: %w", h.Internal, internalconn.ErrNoListener)
	}
	if c.cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.ConnectTimeout)
		defer cancel()
	}
	return c.internal.Dial(ctx, h.Internal, c.passthroughMetadata(h))
}

// internalURLHost is the URL host that stands for an internal host in requests the HTTP
// transports dial (a URL host cannot hold envoy://): the address, hex-encoded, under the
// reserved .internal.invalid name with port 1. parseInternalURLHost reverses it.
func internalURLHost(a internalconn.Addr) string {
	return internalURLHostShared(a, "")
}

// internalURLHostShared is internalURLHost for a request that shares filter state with
// its upstream connection: the objects' digest is part of the host, so the transports
// pool connections per host and shared state, as Envoy keys its connection pools by
// the objects a stream shares (a connection made for one downstream's objects never
// carries another's requests).
func internalURLHostShared(a internalconn.Addr, sharedDigest string) string {
	return hex.EncodeToString([]byte(a.Listener+"\x00"+a.EndpointID+"\x00"+sharedDigest)) + ".internal.invalid:1"
}

// sharedDigest identifies the filter state objects fs shares with upstream ("" for none).
func sharedDigest(fs map[string]internalconn.Object) string {
	if len(fs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(fs))
	for k := range fs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		o := fs[k]
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", k, o.Value, o.Sharing)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func parseInternalURLHost(s string) (internalconn.Addr, bool) {
	enc, ok := strings.CutSuffix(s, ".internal.invalid:1")
	if !ok {
		return internalconn.Addr{}, false
	}
	b, err := hex.DecodeString(enc)
	if err != nil {
		return internalconn.Addr{}, false
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 {
		return internalconn.Addr{}, false
	}
	return internalconn.Addr{Listener: parts[0], EndpointID: parts[1]}, true
}

var errInternalHost = errors.New("internal host not in the cluster")

// metadataAddr reads an "ip:port" string at path in namespace ns of md.
func metadataAddr(md map[string]*structpb.Struct, ns string, path []string) (netip.AddrPort, bool) {
	if ns == "" || len(path) == 0 {
		return netip.AddrPort{}, false
	}
	st := md[ns]
	var v *structpb.Value
	for i, k := range path {
		v = st.GetFields()[k]
		if i < len(path)-1 {
			st = v.GetStructValue()
		}
	}
	ap, err := netip.ParseAddrPort(v.GetStringValue())
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// HandInternal gives the internal listener h names the connection conn itself (a
// terminated CONNECT stream), where Dial would connect a pipe to it: the caller runs the
// returned serve, which serves conn on the caller's goroutine, and the connection counts
// in the cluster's and host's stats as a dialled one. ok is false when the cluster
// cannot hand h a connection: h is no internal address, or the connection to it has a
// transport socket (TLS) or metadata exchange of its own to run; Dial serves those.
// A listener that is not running, or refuses conn, is a connect failure.
func (c *Cluster) HandInternal(ctx context.Context, h Host, conn net.Conn) (serve func(), ok bool, err error) {
	if h.Internal.Listener == "" || c.internal == nil || c.cfg.MX != nil {
		return nil, false, nil
	}
	if tc, _ := c.cfg.Transport(h); tc != nil {
		return nil, false, nil
	}
	hs := c.hostState(h)
	c.stats.UpstreamCxTotal.Inc()
	hs.cxTotal.Add(1)
	inner, err := c.internal.Hand(ctx, h.Internal, c.passthroughMetadata(h), conn)
	if err == nil && inner == nil {
		err = fmt.Errorf("%s: refused by the internal listener", h.Internal)
	}
	if err != nil {
		c.stats.UpstreamCxFail.Inc()
		hs.cxFail.Add(1)
		return nil, true, fmt.Errorf("connect to %s: %w", h, err)
	}
	c.stats.UpstreamCxConnectMs.Record(0)
	c.stats.UpstreamCxActive.Inc()
	hs.cxActive.Add(1)
	connected := time.Now()
	return func() {
		defer func() {
			c.stats.UpstreamCxLengthMs.Record(uint64(time.Since(connected).Milliseconds()))
			c.stats.UpstreamCxActive.Dec()
			hs.cxActive.Add(-1)
		}()
		inner()
	}, true, nil
}
