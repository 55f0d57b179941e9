package discovery

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// stopGrace bounds how long Run waits for streams to end before closing them hard.
const stopGrace = 5 * time.Second

// Options configures a Server.
type Options struct {
	// Logger receives the server's logs and go-control-plane's (under
	// "subsystem"="go-control-plane"). Required; the caller names the component.
	Logger *slog.Logger
	// SocketPath is the unix socket to serve ADS on (the lab's xds.sock). Required. A
	// stale socket left by a crashed lab is replaced; any other file there is an error.
	SocketPath string
	// SocketGID, when >= 0, gives the socket that group and mode 0660, so the proxy
	// (gid 1337) can connect. Optional; -1 leaves the socket as created.
	SocketGID int
	// TCPAddr, when set, is a TCP address to also serve on (e.g. "127.0.0.1:0"), for
	// debugging tools. Optional; it requires Authorize, since any local user can connect.
	TCPAddr string
	// Authorize, when set, binds every xDS stream to a proxy the connection may speak
	// for (auth.go), on the unix socket and on TCP. Optional without TCPAddr: nil serves
	// any node id to whoever can open the socket.
	Authorize Authorizer
	// TCPTLS, when set with Authorize, serves over TLS the TCP clients that open with a
	// TLS ClientHello; a client certificate it verifies identifies the peer
	// (PeerCertificate), as istiod authenticates proxies by their workload certificates.
	// Plaintext TCP clients are served as before. Set NextProtos "h2" (gRPC requires
	// it); it is added when empty. Optional.
	TCPTLS *tls.Config
	// OnRefused, when set, observes every stream Authorize refused, with the node id it
	// claimed and why. It is called synchronously and must not block. Optional.
	OnRefused func(nodeID string, err error)
	// OnEvent, when set, observes every connect, push, ACK, NACK and disconnect. It is
	// called synchronously and must not block. Optional.
	OnEvent func(Event)
	// Register, when set, adds more services to the gRPC server before it serves (the
	// lab's CA shares xds.sock, as istiod serves its CA on the xDS port). Optional.
	Register func(*grpc.Server)
	// HistorySize is how many snapshots to keep per proxy for History and Diff.
	// Optional; DefaultHistorySize when zero.
	HistorySize int
	// MaxPushBytes is the most one proxy's resources of one type may weigh (Update
	// refuses that proxy's config above it). Optional; MaxPushBytes when zero. A lab's
	// tests set a small one to make one proxy's config fail.
	MaxPushBytes int
	// WDS is what ztunnels' WDS needs beyond the model (the lab's node name, trust
	// domain). Optional; without a node name no pod is on a ztunnel's node.
	WDS xds.WDSOptions
	// Upstream, when set, is the gRPC target of another control plane (istiod, e.g.
	// "unix:///run/meshlab/<lab>/istiod-xds.sock"): every authenticated ADS stream is
	// relayed to it (relay.go) and Update generates nothing. Optional.
	Upstream string
	// HistoryBytes bounds the encoded size of the resources the history keeps, across
	// proxies; the oldest snapshots go first, never a proxy's current one. Optional;
	// DefaultHistoryBytes when zero.
	HistoryBytes int
}

// Server is the ADS server of one lab. Create it with New, then call Run once.
type Server struct {
	log     *slog.Logger
	path    string
	unixLn  net.Listener
	tcpLn   net.Listener // nil when not serving TCP
	grpc    *grpc.Server
	cache   *sharedCache
	tracker *tracker
	cancel  context.CancelFunc // ends go-control-plane's streams
	ctx     context.Context    // ends with cancel: releases held pushes
	faults  *faults
	history *history
	relay   *relay // set with Options.Upstream

	mu      sync.Mutex // serialises Update; guards version and nodes
	version uint64
	nodes   []string     // node ids holding a snapshot
	model   *model.Model // the last model given to Update, for SetNack
	// proxies holds, per node id, what its snapshot was made of: Update gives a new
	// version only to proxies whose resources changed, and reuses the types a change
	// does not touch (update.go).
	proxies map[string]*proxyState
	// wants holds, per node id, the version of its current snapshot (TypeStatus.Want).
	wants map[string]string
	// failed holds, per node id, why the last update could not generate its config
	// (ProxyStatus.PushError); a later update that generates it clears it.
	failed map[string]string
	// maxPush is Options.MaxPushBytes, or MaxPushBytes.
	maxPush int

	wds  xds.WDSOptions
	wp   waypointWDS // waypoint_wds.go; guarded by mu
	ztMu sync.Mutex  // guards zt; taken after mu when both are
	zt   ztunnels    // ztunnel.go

	runOnce sync.Once
}

// New listens on the socket (and TCP address) right away, so that when it returns the
// socket exists and proxies may connect; nothing is served until Run.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		return nil, errors.New("new discovery server: Options.Logger is required")
	}
	if o.SocketPath == "" {
		return nil, errors.New("new discovery server: Options.SocketPath is required")
	}
	if o.TCPAddr != "" && o.Authorize == nil {
		return nil, fmt.Errorf("new discovery server: TCP address %s without Options.Authorize: any local user could read and NACK every proxy's config", o.TCPAddr)
	}
	log := o.Logger
	if err := removeStaleSocket(o.SocketPath); err != nil {
		return nil, err
	}
	unixLn, err := net.Listen("unix", o.SocketPath)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.SocketPath, err)
	}
	if o.SocketGID >= 0 {
		if err := setSocketOwner(o.SocketPath, o.SocketGID); err != nil {
			unixLn.Close()
			return nil, err
		}
	}
	var tcpLn net.Listener
	if o.TCPAddr != "" {
		if tcpLn, err = net.Listen("tcp", o.TCPAddr); err != nil {
			unixLn.Close()
			return nil, fmt.Errorf("listen on %s: %w", o.TCPAddr, err)
		}
	}

	codec, err := newPushCodec()
	if err != nil {
		unixLn.Close()
		closeIfSet(tcpLn)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := newFaults()
	hist := newHistory(o.HistorySize, o.HistoryBytes, time.Now)
	observe := func(e Event) {
		hist.observe(e)
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}
	s := &Server{
		log:     log,
		path:    o.SocketPath,
		unixLn:  unixLn,
		tcpLn:   tcpLn,
		grpc:    grpc.NewServer(append(serverOptions(o, log), grpc.ForceServerCodecV2(codec))...),
		cache:   newSharedCache(cachev3.NewSnapshotCache(true, cachev3.IDHash{}, slogAdapter{log.With("subsystem", "go-control-plane")})),
		tracker: newTrackerObserved(log, time.Now, observe),
		cancel:  cancel,
		ctx:     ctx,
		faults:  f,
		history: hist,
		maxPush: cmp.Or(o.MaxPushBytes, MaxPushBytes),
		wds:     o.WDS,
	}
	s.cache.beforeDelta = s.beforeDeltaWatch
	s.cache.answered = s.tracker.owe
	s.tracker.beforeSend = func(sctx context.Context, node string) { f.gate(sctx, ctx, node) }
	xds := serverv3.NewServer(ctx, s.cache, s.tracker.callbacks())
	if o.Upstream != "" {
		if s.relay, err = newRelay(s, o.Upstream); err != nil {
			cancel()
			unixLn.Close()
			closeIfSet(tcpLn)
			return nil, err
		}
		discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s.grpc, s.relay)
	} else {
		discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s.grpc, xds)
	}
	listenerservice.RegisterListenerDiscoveryServiceServer(s.grpc, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(s.grpc, xds)
	routeservice.RegisterRouteDiscoveryServiceServer(s.grpc, xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(s.grpc, xds)
	secretservice.RegisterSecretDiscoveryServiceServer(s.grpc, xds)
	if o.Register != nil {
		o.Register(s.grpc)
	}
	log.Info("xds listening", "socket", o.SocketPath, "tcp", s.TCPAddr())
	return s, nil
}

// serverOptions are the gRPC server's: message sizes above what a push may be
// (limits.go), and, with Options.Authorize, the peer credentials and the stream binding
// of auth.go.
func serverOptions(o Options, log *slog.Logger) []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxRequestBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
	if o.Authorize == nil {
		return opts
	}
	onRefuse := func(nodeID string, err error) {
		log.Warn("xds stream refused", "node", nodeID, "err", err)
		if o.OnRefused != nil {
			o.OnRefused(nodeID, err)
		}
	}
	tc := o.TCPTLS
	if tc != nil && len(tc.NextProtos) == 0 {
		tc = tc.Clone()
		tc.NextProtos = []string{"h2"}
	}
	return append(opts, grpc.Creds(peerCreds{tls: tc}), grpc.ChainStreamInterceptor(authStreamInterceptor(o.Authorize, onRefuse)))
}

// removeStaleSocket removes a socket file at path, which a lab that crashed leaves
// behind; it refuses to remove anything else.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("listen on %s: a non-socket file is in the way", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// setSocketOwner gives the socket group gid and mode 0660, keeping its owner.
func setSocketOwner(path string, gid int) error {
	if err := os.Chown(path, -1, gid); err != nil {
		return fmt.Errorf("chown %s to group %d: %w", path, gid, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// TCPAddr returns the TCP address the server listens on, or nil when it does not.
func (s *Server) TCPAddr() net.Addr {
	if s.tcpLn == nil {
		return nil
	}
	return s.tcpLn.Addr()
}

// Run serves until ctx ends, then ends every stream, stops the gRPC server (gracefully,
// within a few seconds) and removes the socket. It returns nil after a clean stop, or
// the error that made serving fail. Run may be called only once.
func (s *Server) Run(ctx context.Context) error {
	err := errors.New("run discovery server: Run called twice")
	s.runOnce.Do(func() { err = s.run(ctx) })
	return err
}

func (s *Server) run(ctx context.Context) error {
	// Served through gatedListener, so that StopFor can refuse and drop connections.
	lns := []net.Listener{gatedListener{Listener: s.unixLn, f: s.faults}}
	if s.tcpLn != nil {
		lns = append(lns, gatedListener{Listener: s.tcpLn, f: s.faults})
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- s.grpc.Serve(ln) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		serveErr = fmt.Errorf("serve xds on %s: %w", s.path, serveErr)
	}
	s.stop()
	for range len(lns) - boolInt(serveErr != nil) {
		<-errc // Serve returns nil once the server is stopped
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Join(serveErr, fmt.Errorf("remove socket: %w", err))
	}
	if s.relay != nil {
		_ = s.relay.close()
	}
	s.log.Info("xds stopped")
	return serveErr
}

// stop ends go-control-plane's stream loops (so graceful stop does not wait for proxies
// to hang up), then stops gRPC, hard if streams do not end within stopGrace.
func (s *Server) stop() {
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopGrace):
		s.log.Warn("xds streams did not end in time; closing them")
		s.grpc.Stop()
		<-done
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Close releases the listeners of a server whose Run was never called, removing the
// socket. It does nothing after Run.
func (s *Server) Close() error {
	var err error
	s.runOnce.Do(func() {
		s.cancel()
		s.grpc.Stop()
		err = errors.Join(s.unixLn.Close(), closeIfSet(s.tcpLn))
		if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	})
	return err
}

func closeIfSet(ln net.Listener) error {
	if ln == nil {
		return nil
	}
	return ln.Close()
}
