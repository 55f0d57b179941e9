package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Names in the bootstrap that xDS resources and Istio tooling refer to.
const (
	xdsClusterName         = "xds-grpc"
	prometheusClusterName  = "prometheus_stats"
	agentClusterName       = "agent"
	sdsClusterName         = "sds-grpc"
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	meshID                 = "cluster.local"
)

// buildBootstrap returns the bootstrap of one epoch, shaped as Istio's
// envoy_bootstrap.json (with its sds-grpc cluster). c must have its defaults applied.
// It is a pure function of c: the epoch only names the file.
func buildBootstrap(c Config) (*bootstrapv3.Bootstrap, error) {
	meta, err := nodeMetadata(c)
	if err != nil {
		return nil, fmt.Errorf("build node metadata: %w", err)
	}
	adminLog, err := anypb.New(&filev3.FileAccessLog{Path: "/dev/null"})
	if err != nil {
		return nil, fmt.Errorf("pack admin access log: %w", err)
	}
	xds, err := grpcPipeCluster(xdsClusterName, c.XDSSocket)
	if err != nil {
		return nil, err
	}
	sds, err := grpcPipeCluster(sdsClusterName, SDSSocketPath(c.RunDir))
	if err != nil {
		return nil, err
	}
	prom, err := httpListener("stats", PrometheusPort, "/stats/prometheus", prometheusClusterName)
	if err != nil {
		return nil, err
	}
	health, err := httpListener("agent", HealthPort, "/healthz/ready", agentClusterName)
	if err != nil {
		return nil, err
	}
	ads := func() *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			InitialFetchTimeout:   durationpb.New(0),
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}
	}
	return &bootstrapv3.Bootstrap{
		Node: &corev3.Node{
			Id:       c.NodeID,
			Cluster:  c.ServiceCluster,
			Metadata: meta,
			// Envoy replaces these with its own build; meshlab proxy keeps them, so
			// istioctl and istiod read its version (meshlab/1.0.0-dev/Clean/RELEASE/Go)
			// instead of 0.0.0.
			UserAgentName:        "envoy",
			UserAgentVersionType: proxyBuildVersion,
		},
		Admin: &bootstrapv3.Admin{
			AccessLog: []*accesslogv3.AccessLog{{
				Name:       "envoy.access_loggers.file",
				ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: adminLog},
			}},
			Address: tcpAddress("127.0.0.1", uint32(c.AdminPort)),
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			LdsConfig: ads(),
			CdsConfig: ads(),
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:                   corev3.ApiConfigSource_GRPC,
				SetNodeOnFirstMessageOnly: true,
				TransportApiVersion:       corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
						EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xdsClusterName},
					},
				}},
			},
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{
				xds,
				sds,
				staticCluster(prometheusClusterName, tcpAddress("127.0.0.1", uint32(c.AdminPort))),
				staticCluster(agentClusterName, tcpAddress("127.0.0.1", uint32(c.StatusPort))),
			},
			Listeners: []*listenerv3.Listener{prom, health},
		},
	}, nil
}

// proxyBuildVersion is meshlab proxy's version (its server_info version
// "meshlab/1.0.0-dev/Clean/RELEASE/Go") as Envoy reports its build in
// node.user_agent_build_version.
var proxyBuildVersion = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
	Version: &typev3.SemanticVersion{MajorNumber: 1},
	Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"build.label":     structpb.NewStringValue("dev"),
		"revision.status": structpb.NewStringValue("Clean"),
		"build.type":      structpb.NewStringValue("RELEASE"),
		"ssl.version":     structpb.NewStringValue("Go"),
	}},
}}

// nodeMetadata is Istio's node metadata subset that meshlab fills.
func nodeMetadata(c Config) (*structpb.Struct, error) {
	labels := make(map[string]any, len(c.Labels)+2)
	for k, v := range c.Labels {
		labels[k] = v
	}
	// Istio's injector labels every pod with its canonical service and revision, which
	// istio-proxy's peer metadata and istio.stats read from LABELS.
	name, rev := canonicalService(c.Labels, c.Workload)
	labels[canonicalNameLabel], labels[canonicalRevisionLabel] = name, rev
	md := map[string]any{
		"NAMESPACE":             c.Namespace,
		"NAME":                  c.Pod,
		"LABELS":                labels,
		"SERVICE_ACCOUNT":       c.ServiceAccount,
		"INSTANCE_IPS":          c.PodIP.String(),
		"MESH_ID":               meshID,
		"INTERCEPTION_MODE":     "REDIRECT",
		"ENVOY_PROMETHEUS_PORT": PrometheusPort,
		"ENVOY_STATUS_PORT":     HealthPort,
		"WORKLOAD_NAME":         c.Workload,
		"ISTIO_VERSION":         "meshlab",
		// CLUSTER_ID is istiod's cluster name for a single-cluster mesh; the peer
		// filters and istio.stats report it as source_cluster/destination_cluster.
		"CLUSTER_ID": clusterID,
	}
	if c.Workload != "" {
		md["OWNER"] = "kubernetes://apis/apps/v1/namespaces/" + c.Namespace + "/deployments/" + c.Workload
	}
	return structpb.NewStruct(md)
}

// Istio's canonical service labels and its single cluster's id.
const (
	canonicalNameLabel     = "service.istio.io/canonical-name"
	canonicalRevisionLabel = "service.istio.io/canonical-revision"
	clusterID              = "Kubernetes"
)

// canonicalService returns the canonical service name and revision Istio's injector
// derives from a pod's labels: its own canonical labels, else app.kubernetes.io/name or
// app (else the workload name), and app.kubernetes.io/version or version (else "latest").
func canonicalService(labels map[string]string, workload string) (name, revision string) {
	name = firstLabel(labels, canonicalNameLabel, "app.kubernetes.io/name", "app")
	if name == "" {
		name = workload
	}
	revision = firstLabel(labels, canonicalRevisionLabel, "app.kubernetes.io/version", "version")
	if revision == "" {
		revision = "latest"
	}
	return name, revision
}

func firstLabel(labels map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := labels[k]; v != "" {
			return v
		}
	}
	return ""
}

func tcpAddress(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func staticCluster(name string, addr *corev3.Address) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}},
				}},
			}},
		},
	}
}

// grpcPipeCluster is a gRPC upstream on a unix socket, spoken to over HTTP/2: the ADS
// upstream (the lab's xds.sock) and, as in Istio's bootstrap, sds-grpc (the agent's sds.sock).
func grpcPipeCluster(name, socket string) (*clusterv3.Cluster, error) {
	opts, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pack %s http protocol options: %w", name, err)
	}
	cl := staticCluster(name, &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: socket}}})
	cl.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: opts}
	return cl, nil
}

// httpListener is a static 0.0.0.0:port listener whose HTTP connection manager routes
// one path prefix to one cluster, as Istio's 15090 and 15021 listeners.
func httpListener(statPrefix string, port uint32, prefix, cluster string) (*listenerv3.Listener, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, fmt.Errorf("pack router: %w", err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    "backend",
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
					}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("pack http connection manager %s: %w", statPrefix, err)
	}
	return &listenerv3.Listener{
		Address: tcpAddress("0.0.0.0", port),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
			}},
		}},
	}, nil
}

// marshalBootstrap renders b as indented JSON with Envoy's proto field names. protojson's
// own whitespace is deliberately unstable, so it is normalised with json.Indent.
func marshalBootstrap(b *bootstrapv3.Bootstrap) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("marshal bootstrap: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indent bootstrap: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeBootstrap writes epoch's bootstrap to c.bootstrapPath(epoch), mode 0644 because
// the proxy runs as uid 1337 and must read it. The file is replaced atomically.
func writeBootstrap(c Config, epoch int) (string, error) {
	b, err := buildBootstrap(c)
	if err != nil {
		return "", err
	}
	if err := mergeBootstrapOverride(b, c.BootstrapOverride); err != nil {
		return "", err
	}
	if err := b.ValidateAll(); err != nil {
		return "", fmt.Errorf("validate bootstrap: %w", err)
	}
	data, err := marshalBootstrap(b)
	if err != nil {
		return "", err
	}
	path := c.bootstrapPath(epoch)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("write bootstrap: %w", err)
	}
	// WriteFile honours the umask; the proxy's uid needs read access regardless.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", fmt.Errorf("chmod bootstrap: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("rename bootstrap: %w", err)
	}
	return path, nil
}
