package listener

import (
	"crypto/x509"
	"net"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
)

// istioDownstream is what istio-proxy's filters learned of a downstream connection: the
// metadata exchange running on it (nil without one) and the URI SANs of both ends'
// certificates ("" for plaintext or none).
type istioDownstream struct {
	Exchange          *peer.Exchange
	PeerSAN, LocalSAN string
}

// istioConn starts the chain's istio.metadata_exchange on conn (it runs only when the
// connection negotiated its ALPN, istio-peer-exchange) and returns the connection the
// terminal filter reads.
func (m *Manager) istioConn(fc *FilterChain, conn net.Conn, localCert, peerCert *x509.Certificate) (net.Conn, istioDownstream) {
	var d istioDownstream
	if peerCert != nil && len(peerCert.URIs) > 0 {
		d.PeerSAN = peerCert.URIs[0].String()
	}
	if localCert != nil && len(localCert.URIs) > 0 {
		d.LocalSAN = localCert.URIs[0].String()
	}
	if fc.MX != nil {
		conn, d.Exchange = fc.MX.Wrap(conn, m.mxStats())
	}
	return conn, d
}

func (m *Manager) mxStats() *peer.MXStats {
	m.mxOnce.Do(func() { m.mx = peer.NewMXStats(m.deps.Stats) })
	return m.mx
}

// recordIstioBuild sets istio_build once a listener carries istio.stats, as istio-proxy
// does when the filter's config is created.
func (m *Manager) recordIstioBuild(cfgs []*Config) {
	for _, c := range cfgs {
		for _, fc := range append(append([]*FilterChain(nil), c.Chains...), c.Default) {
			if fc != nil && (fc.IstioStats != nil || fc.HTTP != nil && fc.HTTP.IstioStats != nil) {
				istiostats.RecordBuild(m.deps.Stats, peer.Local().Metadata)
				return
			}
		}
	}
}
