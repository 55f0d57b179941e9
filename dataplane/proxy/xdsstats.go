package proxy

import (
	"github.com/meshlab/meshlab/dataplane/proxy/listener"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// tagRDSRouteConfig is Envoy's tag for the route configuration name in RDS stats.
const tagRDSRouteConfig = "envoy.rds_route_config"

// rdsStats returns the stats scope of an RDS subscription, Envoy's
// "http.<stat_prefix>.rds.<route_config_name>." with the stat_prefix of the first HTTP
// connection manager that uses the route configuration.
func (s *Server) rdsStats(name string) stats.Scope {
	prefix := ""
	for _, l := range s.listeners.Configs() {
		for _, fc := range append(append([]*listener.FilterChain(nil), l.Chains...), l.Default) {
			if prefix == "" && fc != nil && fc.HTTP != nil && fc.HTTP.RDSName == name {
				prefix = fc.HTTP.StatPrefix
			}
		}
	}
	return s.stats.HTTP(prefix).Scope("rds", "").Scope(name, tagRDSRouteConfig)
}

// edsStats returns the stats scope of an EDS subscription: its cluster's, as Envoy counts
// an EDS cluster's updates under "cluster.<name>." (Istio names the EDS service after
// the cluster).
func (s *Server) edsStats(name string) stats.Scope { return s.stats.Cluster(name) }

// countApplied and countRejected count one subscription's part of a response as Envoy's
// GrpcSubscriptionImpl does: update_attempt with update_success when its resource was
// applied, update_attempt with update_rejected when the response was rejected (a
// rejection reaches every subscription of the type, also those that applied their part).
func countApplied(sc stats.Scope) {
	sc.Counter("update_attempt").Inc()
	sc.Counter("update_success").Inc()
}

func countRejected(sc stats.Scope) {
	sc.Counter("update_attempt").Inc()
	sc.Counter("update_rejected").Inc()
}
