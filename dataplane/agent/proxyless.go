package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// Proxyless gRPC in a pod (Istio's grpc-agent template, DISABLE_ENVOY=true): the agent
// runs no proxy and captures nothing; it gets and renews the workload certificate and
// writes it as the files of the bootstrap's file_watcher provider (OUTPUT_CERTS), writes
// the gRPC bootstrap, and serves an XDS proxy on a unix socket for the app
// (unix:///etc/istio/proxy/XDS in Istio). The pod's two directories are Istio's two
// emptyDir volumes shared with the app's container: GRPCXDSDir (istio-xds, mounted on
// /etc/istio/proxy) and GRPCCertDir (istio-data, on /var/lib/istio/data). The lab binds
// them into the app's sandbox at the same paths, so the bootstrap's paths hold for both.
const (
	// GRPCXDSSocketFile is the XDS proxy's socket in GRPCXDSDir, as Istio's
	// /etc/istio/proxy/XDS.
	GRPCXDSSocketFile = "XDS"
)

// GRPCXDSDir is the directory of a proxyless pod's bootstrap and XDS socket in its run
// directory (Istio's istio-xds volume).
func GRPCXDSDir(runDir string) string { return filepath.Join(runDir, "istio-xds") }

// GRPCCertDir is the directory of a proxyless pod's certificate files in its run
// directory (Istio's istio-data volume, OUTPUT_CERTS).
func GRPCCertDir(runDir string) string { return filepath.Join(runDir, "istio-data") }

// GRPCBootstrapPath is the bootstrap a proxyless pod's app gets in GRPCBootstrapEnv.
func GRPCBootstrapPath(runDir string) string {
	return filepath.Join(GRPCXDSDir(runDir), GRPCBootstrapFile)
}

// runProxyless is Run for a proxyless pod.
func runProxyless(ctx context.Context, c Config, log *slog.Logger, d deps) (err error) {
	log = log.With("mode", "proxyless")
	xdsDir, certDir := GRPCXDSDir(c.RunDir), GRPCCertDir(c.RunDir)
	for _, dir := range []string{xdsDir, certDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range closers {
				_ = c()
			}
		}
	}()
	sockPath := SocketPath(c.RunDir)
	sockLn, healthLn, err := listenAPIAndStatus(c, d)
	if err != nil {
		return err
	}
	closers = append(closers, sockLn.Close, healthLn.Close)
	xdsSock := filepath.Join(xdsDir, GRPCXDSSocketFile)
	xdsLn, err := listenUnix(xdsSock)
	if err != nil {
		return fmt.Errorf("start xds proxy: %w", err)
	}
	closers = append(closers, xdsLn.Close)
	if c.AppUID != 0 {
		if err := os.Chown(xdsSock, int(c.AppUID), int(c.AppUID)); err != nil {
			return fmt.Errorf("chown %s: %w", xdsSock, err)
		}
	}
	cac, err := newCAClient(c.XDSSocket, c.TokenPath)
	if err != nil {
		return err
	}
	defer cac.Close()
	proxy, err := newXDSProxy(c.XDSSocket, log.With("subsystem", "xds-proxy"))
	if err != nil {
		return err
	}
	defer proxy.Close()
	certs := newCertManager(cac, spiffeID(c.TrustDomain, c.Namespace, c.ServiceAccount), c.CertTTL, log.With("subsystem", "certs"))
	bootstrap, err := WriteGRPCBootstrap(xdsDir, GRPCBootstrapOptions{
		ServerURI: "unix://" + xdsSock, NodeID: c.NodeID, Namespace: c.Namespace, PodName: c.Pod,
		InstanceIP: c.PodIP.String(), ServiceAccount: c.ServiceAccount, Labels: c.Labels, CertDir: certDir,
	})
	if err != nil {
		return err
	}
	closers = nil // from here on the servers own the listeners

	status := func(context.Context) agentapi.Status {
		st := agentapi.Status{Pod: c.Pod, DataPlane: agentapi.DataPlaneProxyless, Settings: c.settings()}
		if err := grpcReady(bootstrap); err != nil {
			st.Message = "not ready: " + err.Error()
		} else {
			st.Ready = true
		}
		cs := certs.snapshot()
		st.Cert = &cs
		st.Proxyless = &agentapi.ProxylessStatus{Bootstrap: bootstrap, XDSSocket: xdsSock, CertDir: certDir, Relay: proxy.status()}
		return st
	}
	svcCtx, stopSvcs := context.WithCancel(ctx)
	defer stopSvcs()
	errc := make(chan error, 5)
	var wg sync.WaitGroup
	service := func(name string, run func(context.Context) error) {
		wg.Go(func() {
			if err := run(svcCtx); err != nil {
				log.Error("agent service failed", "service", name, "err", err)
				errc <- fmt.Errorf("%s: %w", name, err)
				stopSvcs() // a pod without its agent services is broken: stop
			}
		})
	}
	service("agent.sock", func(ctx context.Context) error {
		return serveHTTP(ctx, sockLn, withCertRoutes(proxylessSockHandler(c.Pod, status, log), certs, log))
	})
	service("status", func(ctx context.Context) error {
		mux := http.NewServeMux()
		mux.Handle("GET /healthz/ready", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			// Istio's grpcready probe: the bootstrap loads and its certificate files exist.
			if err := grpcReady(bootstrap); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		return serveHTTP(ctx, healthLn, mux)
	})
	service("certs", certs.Run)
	service("cert files", func(ctx context.Context) error { return writeCertFiles(ctx, certs, certDir, int(c.AppUID)) })
	service("xds proxy", func(ctx context.Context) error { return proxy.serve(ctx, xdsLn) })
	log.Info("proxyless agent started", "bootstrap", bootstrap, "xds_socket", xdsSock, "cert_dir", certDir)

	<-svcCtx.Done()
	wg.Wait()
	close(errc)
	for _, p := range []string{sockPath, xdsSock} {
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			log.Warn("remove socket", "path", p, "err", rmErr)
		}
	}
	var errs []error
	for e := range errc {
		errs = append(errs, e)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("run agent: %w", err)
	}
	log.Info("agent stopped")
	return nil
}

// proxylessSockHandler is agent.sock without a proxy: the status, and a clear refusal
// of what needs one (restart, proxy settings, the admin API).
func proxylessSockHandler(pod string, status func(context.Context) agentapi.Status, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, status(r.Context()), log)
	})
	noProxy := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusConflict, map[string]string{"error": fmt.Sprintf(
			"pod %s is proxyless gRPC (grpc-agent template): it runs no proxy, so %s %s has nothing to act on; its app's xDS stream is relayed by the agent", pod, r.Method, r.URL.Path)}, log)
	}
	for _, p := range []string{"POST /restart", "GET /proxy-config", "PUT /proxy-config", "GET /admin/", "POST /admin/"} {
		mux.HandleFunc(p, noProxy)
	}
	return mux
}

// writeCertFiles writes the workload certificate into dir each time the manager gets
// one (for grpc-go's file_watcher provider, which reads them again every refresh
// interval), and reports each write as an SDS stream's ACK would, so a renewal over
// agent.sock answers once the files hold the new certificate.
func writeCertFiles(ctx context.Context, certs *certManager, dir string, uid int) error {
	s := certs.acks.open()
	defer certs.acks.closeStream(s)
	if uid == 0 {
		uid = -1
	}
	for {
		cur, changed := certs.current()
		if cur != nil {
			if err := WriteGRPCCerts(dir, cur.chainPEM, cur.keyPEM, cur.rootPEM, uid); err != nil {
				return err
			}
			certs.acks.ack(s, serial(cur.leaf))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// grpcReady is Istio's readiness probe for a proxyless pod (pilot-agent's grpcready):
// the bootstrap parses and every file its file_watcher certificate provider names exists.
func grpcReady(bootstrap string) error {
	b, err := os.ReadFile(bootstrap)
	if err != nil {
		return fmt.Errorf("load gRPC bootstrap: %w", err)
	}
	var doc struct {
		XDSServers []struct {
			ServerURI string `json:"server_uri"`
		} `json:"xds_servers"`
		CertProviders map[string]struct {
			PluginName string            `json:"plugin_name"`
			Config     map[string]string `json:"config"`
		} `json:"certificate_providers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("load gRPC bootstrap %s: %w", bootstrap, err)
	}
	if len(doc.XDSServers) == 0 {
		return fmt.Errorf("gRPC bootstrap %s: no xds_servers", bootstrap)
	}
	for _, p := range doc.CertProviders {
		if p.PluginName != "file_watcher" {
			continue
		}
		for _, k := range []string{"certificate_file", "private_key_file", "ca_certificate_file"} {
			if _, err := os.Stat(p.Config[k]); err != nil {
				return fmt.Errorf("%s does not exist yet (the workload certificate)", p.Config[k])
			}
		}
	}
	return nil
}

// writeOutputCerts writes the workload certificate into dir (OUTPUT_CERTS) each time the
// manager gets one. Every file is 0644, as pilot-agent writes them on Kubernetes, so
// that the pod's other containers (Prometheus, as another user) read them: the
// directory is theirs to share, an emptyDir. Unlike writeCertFiles it acknowledges
// nothing: the proxy's SDS stream is what a renewal waits for.
func writeOutputCerts(ctx context.Context, certs *certManager, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output certs: %w", err)
	}
	for {
		cur, changed := certs.current()
		if cur != nil {
			for _, f := range []struct {
				name string
				data []byte
			}{{GRPCKeyFile, cur.keyPEM}, {GRPCCertFile, cur.chainPEM}, {GRPCRootFile, cur.rootPEM}} {
				if err := writeAtomic(filepath.Join(dir, f.name), f.data, 0o644, -1); err != nil {
					return fmt.Errorf("output certs: %w", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}
