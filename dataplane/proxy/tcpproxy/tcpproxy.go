// Package tcpproxy is the proxy's envoy.filters.network.tcp_proxy: it connects a
// downstream connection to a host of one cluster and copies bytes both ways, passing on
// half-closes, with Envoy's tcp.<stat_prefix>.* stats.
package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// FilterName is the filter's Envoy name.
const FilterName = "envoy.filters.network.tcp_proxy"

var allow = fieldcheck.Allow{
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy": {"stat_prefix", "cluster"},
}

// Config is a compiled tcp_proxy.
type Config struct {
	StatPrefix string
	Cluster    string
}

// Compile validates a TcpProxy typed_config and compiles it.
func Compile(a *anypb.Any) (*Config, error) {
	var p tcpv3.TcpProxy
	if err := a.UnmarshalTo(&p); err != nil {
		return nil, fmt.Errorf("unpack TcpProxy: %w", err)
	}
	if err := p.ValidateAll(); err != nil {
		return nil, err
	}
	if err := allow.Check(&p); err != nil {
		return nil, err
	}
	if p.GetCluster() == "" {
		return nil, errors.New("cluster: only a single cluster is supported")
	}
	return &Config{StatPrefix: p.GetStatPrefix(), Cluster: p.GetCluster()}, nil
}

// Deps are what the filter needs from the rest of the proxy.
type Deps struct {
	Clusters *cluster.Manager // required
	Stats    *stats.Store     // required
	Logger   *slog.Logger     // required
}

// Serve proxies conn to the cluster until both directions are closed or ctx ends. local
// is the connection's (restored original) destination, the target of ORIGINAL_DST
// clusters. The caller closes conn.
func Serve(ctx context.Context, cfg *Config, deps Deps, conn net.Conn, local netip.AddrPort) {
	sc := deps.Stats.TCP(cfg.StatPrefix)
	sc.Counter("downstream_cx_total").Inc()
	cl, ok := deps.Clusters.Get(cfg.Cluster)
	if !ok {
		sc.Counter("downstream_cx_no_route").Inc()
		return
	}
	host, err := cl.Pick(local)
	if err != nil {
		return
	}
	up, err := cl.Dial(ctx, host)
	if err != nil {
		deps.Logger.Debug("tcp_proxy upstream connect failed", "cluster", cfg.Cluster, "err", err)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() {
		_ = up.Close()
		_ = conn.Close()
	})
	defer stop()
	rx, tx := sc.Counter("downstream_cx_rx_bytes_total"), sc.Counter("downstream_cx_tx_bytes_total")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, _ := io.Copy(up, conn)
		rx.Add(n)
		closeWrite(up)
	}()
	n, _ := io.Copy(conn, up)
	tx.Add(n)
	closeWrite(conn)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
