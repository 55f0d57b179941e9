package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshlab/meshlab/dataplane/proxy/listener"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// sdsClients runs one SDS stream (SecretDiscoveryService.StreamSecrets) per static
// cluster that secrets are fetched from, as Envoy does for Istio's sds-grpc.
type sdsClients struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	clients map[string]*xdsclient.Client
}

func newSDSClients() *sdsClients {
	ctx, cancel := context.WithCancel(context.Background())
	return &sdsClients{ctx: ctx, cancel: cancel, clients: map[string]*xdsclient.Client{}}
}

// close stops every stream and waits for them.
func (c *sdsClients) close() {
	c.cancel()
	c.wg.Wait()
}

// secretsHandler applies SDS responses into the server's secret store.
type secretsHandler struct{ s *Server }

// Apply implements xdsclient.Handler for an SDS stream.
func (h secretsHandler) Apply(typeURL, version string, resources []*anypb.Any) error {
	if typeURL != xdsclient.SecretType {
		return fmt.Errorf("unsupported resource type %s", typeURL)
	}
	return h.s.applySecrets(version, resources)
}

// applySecrets compiles every secret of a response and installs all of them, or none.
func (s *Server) applySecrets(version string, resources []*anypb.Any) error {
	var secs []*tlsctx.Secret
	for i, a := range resources {
		m, err := unpack(a, &tlsv3.Secret{}, "secret", i)
		if err != nil {
			return err
		}
		sec, err := tlsctx.CompileSecret(m, version)
		if err != nil {
			return err
		}
		secs = append(secs, sec)
	}
	s.secrets.Set(secs...)
	s.mu.Lock()
	s.checkInitLocked()
	s.mu.Unlock()
	s.log.With("component", "secret").Info(fmt.Sprintf("sds: %d secret(s) at version %s", len(secs), version))
	return nil
}

// clusterTLS returns the upstream TLS contexts of the running clusters.
func (s *Server) clusterTLS() []*tlsctx.Context {
	var out []*tlsctx.Context
	for _, cl := range s.clusters.All() {
		out = append(out, cl.Config().TLSContexts()...)
	}
	return out
}

// listenerTLS returns the downstream TLS contexts of the running listeners.
func (s *Server) listenerTLS() []*tlsctx.Context {
	var out []*tlsctx.Context
	if s.listeners == nil {
		return nil
	}
	for _, l := range s.listeners.Configs() {
		for _, fc := range append(append([]*listener.FilterChain(nil), l.Chains...), l.Default) {
			if fc != nil && fc.TLS != nil {
				out = append(out, fc.TLS)
			}
		}
	}
	return out
}

// secretsReady reports whether every secret the contexts need has arrived: Envoy's
// initial SDS fetch, which holds cluster and listener initialization (Istio sets
// initial_fetch_timeout 0s: wait as long as it takes).
func (s *Server) secretsReady(ctxs []*tlsctx.Context) bool {
	for _, c := range ctxs {
		if s.secrets == nil || !s.secrets.Has(c.SecretNames()...) {
			return false
		}
	}
	return true
}

// watchSecrets subscribes to the secrets the current clusters and listeners reference,
// over ADS or over an SDS stream to their static cluster.
func (s *Server) watchSecrets() {
	bySource := map[tlsctx.Source]map[string]bool{}
	for _, c := range append(s.clusterTLS(), s.listenerTLS()...) {
		for name, src := range c.Sources {
			if bySource[src] == nil {
				bySource[src] = map[string]bool{}
			}
			bySource[src][name] = true
		}
	}
	for src, set := range bySource {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		if src.ADS {
			if s.xds != nil {
				s.xds.Subscribe(xdsclient.SecretType, names)
			}
			continue
		}
		if cl := s.sdsClient(src.Cluster); cl != nil {
			cl.Subscribe(xdsclient.SecretType, names)
		}
	}
}

// sdsClient returns the SDS stream to the named static cluster, starting it if needed;
// nil when there is no such cluster.
func (s *Server) sdsClient(name string) *xdsclient.Client {
	s.sds.mu.Lock()
	defer s.sds.mu.Unlock()
	if c, ok := s.sds.clients[name]; ok {
		return c
	}
	cl, ok := s.clusters.Get(name)
	if !ok || s.sds.ctx.Err() != nil {
		s.log.Warn(fmt.Sprintf("sds: unknown cluster '%s'", name))
		return nil
	}
	conn, err := grpc.NewClient("passthrough:///"+name,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			h, err := cl.Pick(netip.AddrPort{})
			if err != nil {
				return nil, err
			}
			return cl.Dial(ctx, h)
		}))
	if err != nil {
		s.log.Warn(fmt.Sprintf("sds: create grpc client for %s: %v", name, err))
		return nil
	}
	c := xdsclient.New(xdsclient.Options{
		Conn: conn, Node: s.node, Handler: secretsHandler{s}, Logger: s.log.With("component", "secret"),
		NodeOnFirstMessage: true,
		Open: func(ctx context.Context, cc grpc.ClientConnInterface) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
			return secretv3.NewSecretDiscoveryServiceClient(cc).StreamSecrets(ctx)
		},
	})
	s.sds.clients[name] = c
	s.sds.wg.Add(1)
	go func() {
		defer s.sds.wg.Done()
		defer conn.Close()
		_ = c.Run(s.sds.ctx)
	}()
	return c
}

// secretsDump returns Envoy's SecretsConfigDump; private keys are redacted as Envoy's
// MessageUtil::redact does ("[redacted]").
func (s *Server) secretsDump() *adminv3.SecretsConfigDump {
	d := &adminv3.SecretsConfigDump{}
	if s.secrets == nil {
		return d
	}
	for _, sec := range s.secrets.All() {
		m := proto.Clone(sec.Proto).(*tlsv3.Secret)
		if tc := m.GetTlsCertificate(); tc != nil && tc.GetPrivateKey() != nil {
			tc.PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "[redacted]"}}
		}
		d.DynamicActiveSecrets = append(d.DynamicActiveSecrets, &adminv3.SecretsConfigDump_DynamicSecret{
			Name: sec.Name, VersionInfo: sec.Version, LastUpdated: timestamppb.New(sec.Updated), Secret: mustAny(m),
		})
	}
	return d
}

var _ xdsclient.Handler = secretsHandler{}
