package peer

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// Magic is the first word of istio-proxy's TCP metadata exchange header; the second
// is the length of the serialized Any that follows (both big-endian).
const Magic uint32 = 0x3D230467

// Keys of the exchanged struct.
const (
	keyMetadata   = "x-envoy-peer-metadata"
	keyMetadataID = "x-envoy-peer-metadata-id"
)

// maxPayload bounds the peer's announced payload; a larger one is not an exchange.
const maxPayload = 1 << 20

// Frame returns the bytes a metadata exchange sends: the header and an Any holding a
// Struct {x-envoy-peer-metadata: node metadata, x-envoy-peer-metadata-id: node id}.
func Frame(n *Node) []byte {
	f := map[string]*structpb.Value{keyMetadata: structpb.NewStructValue(n.Workload.Struct())}
	if n.ID != "" {
		f[keyMetadataID] = structpb.NewStringValue(n.ID)
	}
	body, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&structpb.Struct{Fields: f})
	any, _ := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.Struct", Value: body})
	out := make([]byte, 8, 8+len(any))
	binary.BigEndian.PutUint32(out, Magic)
	binary.BigEndian.PutUint32(out[4:], uint32(len(any)))
	return append(out, any...)
}

// ParsePayload decodes the Any that follows the header: the peer and its node id.
func ParsePayload(b []byte, extra []string) (*Workload, string, error) {
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		return nil, "", err
	}
	var s structpb.Struct
	if err := a.UnmarshalTo(&s); err != nil {
		return nil, "", err
	}
	var w *Workload
	if md := s.GetFields()[keyMetadata].GetStructValue(); md != nil {
		w = FromStruct(md, extra)
	}
	return w, s.GetFields()[keyMetadataID].GetStringValue(), nil
}

// MX is a compiled istio.metadata_exchange network or upstream cluster filter
// (envoy.tcp.metadataexchange.config.MetadataExchange). Immutable.
type MX struct {
	// Protocol is the ALPN the connection must have negotiated for the exchange to run
	// ("istio-peer-exchange").
	Protocol string
	// Labels are the additional_labels kept of the peer's labels.
	Labels []string
	// Upstream reports whether this is the cluster filter (the peer is the upstream).
	Upstream bool
}

// MXStats are the filter's counters, under Envoy's "metadata_exchange." prefix.
type MXStats struct {
	ALPNFound, ALPNNotFound, InitialHeaderNotFound, HeaderNotFound, MetadataAdded *stats.Stat
}

// NewMXStats returns the counters in store.
func NewMXStats(store *stats.Store) *MXStats {
	sc := store.Named("metadata_exchange")
	return &MXStats{
		ALPNFound: sc.Counter("alpn_protocol_found"), ALPNNotFound: sc.Counter("alpn_protocol_not_found"),
		InitialHeaderNotFound: sc.Counter("initial_header_not_found"), HeaderNotFound: sc.Counter("header_not_found"),
		MetadataAdded: sc.Counter("metadata_added"),
	}
}

// Wrap starts the exchange on conn when it negotiated m.Protocol over TLS and returns
// the connection the filters above it use; otherwise it counts
// alpn_protocol_not_found and returns conn and nil.
func (m *MX) Wrap(conn net.Conn, st *MXStats) (net.Conn, *Exchange) {
	return m.wrap(conn, st, Local())
}

func (m *MX) wrap(conn net.Conn, st *MXStats, local *Node) (net.Conn, *Exchange) {
	if cs, ok := TLSState(conn); !ok || cs.NegotiatedProtocol != m.Protocol {
		st.ALPNNotFound.Inc()
		return conn, nil
	}
	st.ALPNFound.Inc()
	x := &Exchange{Conn: conn, mx: m, st: st, frame: Frame(local), done: make(chan struct{})}
	return x, x
}

// Exchange is a connection running the metadata exchange: it sends the local frame
// before its first byte in either direction and takes the peer's frame off the front
// of what it reads, as istio-proxy's filter writes on its first read or write and holds
// data until the peer's header is complete. A peer whose first bytes are not a header
// (it runs no exchange) is passed through untouched.
type Exchange struct {
	net.Conn
	mx    *MX
	st    *MXStats
	frame []byte

	wonce sync.Once
	werr  error

	rmu     sync.Mutex
	read    bool   // the peer's header has been dealt with
	pending []byte // bytes read while looking for the header, not a header after all

	done   chan struct{}
	peer   *Workload
	peerID string
	found  bool
}

func (x *Exchange) writeFrame() error {
	x.wonce.Do(func() {
		_, x.werr = x.Conn.Write(x.frame)
		if x.werr == nil {
			x.st.MetadataAdded.Inc()
		}
	})
	return x.werr
}

// Write sends the local frame first, then p.
func (x *Exchange) Write(p []byte) (int, error) {
	if err := x.writeFrame(); err != nil {
		return 0, err
	}
	return x.Conn.Write(p)
}

// Read returns the peer's bytes after its exchange header.
func (x *Exchange) Read(p []byte) (int, error) {
	x.rmu.Lock()
	defer x.rmu.Unlock()
	if !x.read {
		if err := x.writeFrame(); err != nil {
			return 0, err
		}
		if err := x.readHeader(); err != nil {
			return 0, err
		}
	}
	if len(x.pending) > 0 {
		n := copy(p, x.pending)
		x.pending = x.pending[n:]
		return n, nil
	}
	return x.Conn.Read(p)
}

// readHeader reads and parses the peer's frame. It fails only on a read error before
// anything arrived; a short or foreign header ends the exchange (Invalid in
// istio-proxy) and its bytes are kept for the reader.
func (x *Exchange) readHeader() error {
	defer func() {
		if x.read {
			close(x.done)
		}
	}()
	var hdr [8]byte
	n, err := io.ReadFull(x.Conn, hdr[:])
	if err != nil {
		x.st.InitialHeaderNotFound.Inc()
		x.read, x.pending = true, append([]byte(nil), hdr[:n]...)
		if n == 0 {
			return err
		}
		return nil // the peer half-closed early: pass on what came (istio-proxy's end_stream case)
	}
	size := binary.BigEndian.Uint32(hdr[4:])
	if binary.BigEndian.Uint32(hdr[:4]) != Magic || size > maxPayload {
		x.st.InitialHeaderNotFound.Inc()
		x.read, x.pending = true, append([]byte(nil), hdr[:]...)
		return nil
	}
	body := make([]byte, size)
	if n, err := io.ReadFull(x.Conn, body); err != nil {
		x.st.HeaderNotFound.Inc()
		x.read, x.pending = true, append(hdr[:], body[:n]...)
		return nil
	}
	w, id, err := ParsePayload(body, x.mx.Labels)
	x.read = true
	if err != nil {
		x.st.HeaderNotFound.Inc()
		return nil // istio-proxy drops nothing it cannot parse either: the bytes are gone
	}
	x.peer, x.peerID, x.found = w, id, true
	return nil
}

// Done is closed once the peer's header was read or found missing.
func (x *Exchange) Done() <-chan struct{} { return x.done }

// Peer returns the peer's workload and node id once Done is closed and the peer sent
// its metadata; ok is false otherwise.
func (x *Exchange) Peer() (w *Workload, id string, ok bool) {
	select {
	case <-x.done:
		return x.peer, x.peerID, x.found && x.peer != nil
	default:
		return nil, "", false
	}
}

// Finished reports whether the exchange is over (the peer's metadata was read, or it
// is known that none will come).
func (x *Exchange) Finished() bool {
	select {
	case <-x.done:
		return true
	default:
		return false
	}
}

// CloseWrite half-closes the connection when the underlying one supports it.
func (x *Exchange) CloseWrite() error {
	if cw, ok := x.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn returns the connection under the exchange.
func (x *Exchange) NetConn() net.Conn { return x.Conn }

// Find returns the Exchange conn runs on or wraps (through NetConn), nil for none.
func Find(conn net.Conn) *Exchange {
	for i := 0; conn != nil && i < 8; i++ {
		if x, ok := conn.(*Exchange); ok {
			return x
		}
		nc, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		conn = nc.NetConn()
	}
	return nil
}

// TLSState returns the TLS state of the connection conn runs on (through NetConn), and
// false for plaintext.
func TLSState(conn net.Conn) (tls.ConnectionState, bool) {
	for i := 0; conn != nil && i < 8; i++ {
		if cs, ok := conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
			return cs.ConnectionState(), true
		}
		nc, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = nc.NetConn()
	}
	return tls.ConnectionState{}, false
}
