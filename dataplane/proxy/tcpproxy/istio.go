package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
)

// istioSource is what the istio.stats network filter reads of one proxied connection.
type istioSource struct {
	ds   Downstream
	info *accesslog.Info

	mu        sync.Mutex
	connected bool // the upstream connect phase is over with a connection
	up        net.Conn
	cl        *cluster.Cluster
	host      cluster.Host

	sent, received atomic.Int64 // downstream bytes
}

var _ istiostats.TCPSource = (*istioSource)(nil)

// upstream records the upstream connection once it is up (its flags are final then).
func (s *istioSource) upstream(up net.Conn, cl *cluster.Cluster, h cluster.Host) {
	s.mu.Lock()
	s.connected, s.up, s.cl, s.host = true, up, cl, h
	s.mu.Unlock()
}

func (s *istioSource) Side() (*istiostats.Side, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	side := &istiostats.Side{Inbound: s.ds.Inbound, Cluster: s.info.UpstreamCluster}
	if s.cl != nil {
		side.ClusterIstio = s.cl.Config().Proto.GetMetadata().GetFilterMetadata()["istio"]
	}
	if s.ds.IstioStats.Gateway {
		// A waypoint's connection: the client and the principals come from the filter
		// state its connect_terminate shared (the HBONE connection's); the destination
		// workload from the upstream endpoint's istio metadata (no upstream peer
		// discovery runs on a TCP chain), as istio-proxy falls back to it.
		side.PeerSAN, side.LocalSAN = s.ds.PeerSAN, s.ds.LocalSAN
		if s.connected {
			side.Endpoint = s.host.Workload
		}
		fs := s.ds.FilterState
		if p, l := fs["io.istio.peer_principal"].Value, fs["io.istio.local_principal"].Value; p != "" || l != "" {
			side.PeerSAN, side.LocalSAN = p, l
		}
		side.Peer = peer.FromState(fs, peer.KeyDownstreamPeer)
		return side, s.connected
	}
	if s.ds.Inbound {
		side.PeerSAN, side.LocalSAN = s.ds.PeerSAN, s.ds.LocalSAN
		read := false
		if s.ds.MX {
			read = s.ds.Exchange == nil || s.ds.Exchange.Finished()
			if s.ds.Exchange != nil {
				side.Peer, _, _ = s.ds.Exchange.Peer()
			}
		}
		return side, read && s.connected
	}
	if s.up == nil {
		return side, false
	}
	side.Endpoint = s.host.Workload
	side.LocalSAN = s.cl.LocalURISAN(s.host)
	if cs, ok := peer.TLSState(s.up); ok && len(cs.PeerCertificates) > 0 && len(cs.PeerCertificates[0].URIs) > 0 {
		side.PeerSAN = cs.PeerCertificates[0].URIs[0].String()
	}
	read := false
	if s.cl.Config().MX != nil {
		x := peer.Find(s.up)
		read = x == nil || x.Finished()
		if x != nil {
			side.Peer, _, _ = x.Peer()
		}
	}
	return side, read
}

func (s *istioSource) Bytes() (int64, int64) { return s.sent.Load(), s.received.Load() }

// Flags is read only once the connect phase is over (Side reported read) or at the
// end, from the goroutine that sets them, so it never races their writes.
func (s *istioSource) Flags() string { return s.info.Flags.String() }

// countWriter counts the bytes written through it.
type countWriter struct {
	io.Writer
	n *atomic.Int64
}

func (w countWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.n.Add(int64(n))
	return n, err
}
