// Package ztunnel is `meshlab ztunnel`, a Go stand-in for istio/ztunnel, the node proxy of
// Istio's ambient mode. Like the real one it knows only its environment, what istio-cni
// hands it over ZDS (each enrolled pod's network namespace) and what istiod sends over
// WDS: for every pod it opens ztunnel's sockets inside the pod (15001 outbound, 15006
// inbound plaintext, 15008 HBONE, 15053 DNS), gets a certificate for the pod's identity
// and carries the pod's TCP over HBONE, enforcing L4 policy at the destination.
package ztunnel

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/ztunnel/admin"
	"github.com/meshlab/meshlab/dataplane/ztunnel/hbone"
	"github.com/meshlab/meshlab/dataplane/ztunnel/identity"
	"github.com/meshlab/meshlab/dataplane/ztunnel/inpod"
	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
	"github.com/meshlab/meshlab/dataplane/ztunnel/xdsclient"
)

// Ztunnel is one running ztunnel: its WDS state, certificates, tunnels and pods.
type Ztunnel struct {
	cfg    Config
	log    *slog.Logger
	store  *state.Store
	certs  *identity.Manager
	pool   *hbone.Pool
	policy *policies
	obs    Observer
	reg    *metrics.Registry

	rootsMu sync.RWMutex
	roots   *x509.CertPool

	pods *podManager

	xdsSynced chan struct{}
	zdsSynced chan struct{}
	zdsOnce   sync.Once
}

// Options are what Run wires besides the Config.
type Options struct {
	// Observer sees every connection (optional: the default counts ztunnel's metrics and
	// writes ztunnel's access log line to AccessLog).
	Observer Observer
	// AccessLog receives the "connection complete" lines (optional: os.Stderr).
	AccessLog io.Writer
	// Level is the log level the admin's /logging reads and sets (optional).
	Level *slog.LevelVar
}

// Run runs ztunnel until ctx ends. It returns an error only when it cannot start.
func Run(ctx context.Context, cfg Config, opts Options, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx) // the admin's /quitquitquit cancels it
	defer cancel()
	roots, err := loadRoots(cfg.RootCertFile)
	if err != nil {
		return err
	}
	xdsConn, err := grpc.NewClient(grpcTarget(cfg.XDSAddress), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to xds %s: %w", cfg.XDSAddress, err)
	}
	defer xdsConn.Close()
	caConn := xdsConn
	if cfg.CAAddress != cfg.XDSAddress {
		if caConn, err = grpc.NewClient(grpcTarget(cfg.CAAddress), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return fmt.Errorf("connect to ca %s: %w", cfg.CAAddress, err)
		}
		defer caConn.Close()
	}
	z := New(ctx, cfg, &identity.CAClient{Conn: caConn, TokenFile: cfg.TokenFile}, roots, opts, log)
	defer z.pool.Close()

	xc := xdsclient.New(xdsclient.Options{
		Conn: xdsConn, Node: z.node(), TokenFile: cfg.TokenFile, Handler: z, Log: log.With("component", "xds"),
	})
	go func() {
		select {
		case <-xc.Synced():
			close(z.xdsSynced)
		case <-ctx.Done():
		}
	}()
	zc := &inpod.Client{Path: cfg.InpodUDS, Handler: z.pods, Log: log.With("component", "zds")}

	ready := func() bool { return z.Ready() == nil }
	servers := []struct {
		addr string
		h    http.Handler
	}{
		{fmt.Sprintf(":%d", ReadinessPort), admin.ReadyHandler(ready)},
		{fmt.Sprintf(":%d", MetricsPort), z.reg.Handler()},
		{fmt.Sprintf("127.0.0.1:%d", AdminPort), admin.Handler(admin.Options{
			State: adminState{z}, Config: cfg, Level: opts.Level, Shutdown: cancel, Ready: ready,
			Build: admin.Build{Version: "meshlab", BuildProfile: "release", BuildStatus: "Clean"},
		})},
	}
	var https []*http.Server
	var lns []net.Listener
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("listen on %s: %w", s.addr, err)
		}
		lns = append(lns, ln)
		https = append(https, &http.Server{Handler: s.h, ReadHeaderTimeout: 5 * time.Second})
	}
	var wg sync.WaitGroup
	for _, run := range []func(){
		func() { _ = xc.Run(ctx) },
		func() { _ = zc.Run(ctx) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	for i, srv := range https {
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Serve(lns[i]) }()
	}
	log.Info("ztunnel started", "node", cfg.NodeName, "node_id", cfg.NodeID(), "inpod_uds", cfg.InpodUDS)
	<-ctx.Done()
	for _, srv := range https {
		_ = srv.Close()
	}
	z.pods.closeAll()
	wg.Wait()
	return nil
}

// New makes a ztunnel whose certificates come from signer; Run wires it to its sockets.
// Tests drive it directly.
func New(ctx context.Context, cfg Config, signer identity.Signer, roots *x509.CertPool, opts Options, log *slog.Logger) *Ztunnel {
	z := &Ztunnel{
		cfg:       cfg,
		log:       log,
		store:     state.New(cfg.NodeName),
		certs:     identity.NewManager(ctx, signer, log.With("component", "certs")),
		pool:      hbone.NewPool(),
		obs:       opts.Observer,
		reg:       metrics.New(),
		roots:     roots,
		xdsSynced: make(chan struct{}),
		zdsSynced: make(chan struct{}),
	}
	z.policy = &policies{store: z.store, log: log.With("component", "rbac")}
	if z.obs == nil {
		out := opts.AccessLog
		if out == nil {
			out = os.Stderr
		}
		z.obs = &observer{reg: z.reg, out: out}
	}
	z.pods = &podManager{z: z, ctx: ctx, pods: map[string]*pod{}}
	go z.recheckLoop(ctx)
	return z
}

// Store is the WDS state (for the admin's config_dump).
func (z *Ztunnel) Store() *state.Store { return z.store }

// Certificates is the certificate manager (for the admin's config_dump).
func (z *Ztunnel) Certificates() *identity.Manager { return z.certs }

// Metrics is ztunnel's metrics registry (served on 15020).
func (z *Ztunnel) Metrics() *metrics.Registry { return z.reg }

// Admin is ztunnel's admin state (for dataplane/ztunnel/admin).
func (z *Ztunnel) Admin() admin.State { return adminState{z} }

// grpcTarget turns unix:///path (ztunnel's form) or a host:port into a gRPC target.
func grpcTarget(addr string) string {
	if strings.HasPrefix(addr, "/") {
		return "unix://" + addr
	}
	return strings.TrimPrefix(strings.TrimPrefix(addr, "https://"), "http://")
}

func loadRoots(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read root certificate: %w", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse root certificate: %w", err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("read root certificate: %s holds no certificate", path)
	}
	return pool, nil
}

// trust returns the pool peers are verified against: the root file's roots and those
// the CA sent with the certificates (so a rotated root is trusted once the CA sends it).
func (z *Ztunnel) trust() *x509.CertPool {
	z.rootsMu.RLock()
	pool := z.roots.Clone()
	z.rootsMu.RUnlock()
	for _, c := range z.certs.Certificates() {
		for _, r := range c.Roots {
			pool.AddCert(r)
		}
	}
	return pool
}

// node is ztunnel's xDS node: its id and the metadata ztunnel sends.
func (z *Ztunnel) node() *corev3.Node {
	fields := map[string]any{
		"NAME":         z.cfg.PodName,
		"NAMESPACE":    z.cfg.PodNamespace,
		"INSTANCE_IPS": z.cfg.InstanceIP.String(),
		"NODE_NAME":    z.cfg.NodeName,
		"CLUSTER_ID":   z.cfg.ClusterID,
	}
	for k, v := range z.cfg.ProxyMetadata {
		fields[k] = v
	}
	md, _ := structpb.NewStruct(fields)
	return &corev3.Node{Id: z.cfg.NodeID(), Cluster: z.cfg.ClusterID, Metadata: md}
}

// Apply implements xdsclient.Handler: Address and Authorization deltas into the store.
func (z *Ztunnel) Apply(typeURL string, resources []*discoveryv3.Resource, removed []string) error {
	return xdsclient.ApplyTo(z.store, typeURL, resources, removed)
}

// Ready reports whether ztunnel is ready: WDS synced and the node agent's first snapshot
// applied.
func (z *Ztunnel) Ready() error {
	select {
	case <-z.xdsSynced:
	default:
		return errors.New("waiting for the first WDS response")
	}
	select {
	case <-z.zdsSynced:
	default:
		return errors.New("waiting for the node agent's snapshot")
	}
	return nil
}
