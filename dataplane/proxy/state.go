package proxy

import (
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
)

// initState follows Envoy's initialization: the cluster manager initializes first (CDS
// and the EDS of its clusters; state PRE_INITIALIZING), only then is LDS requested and
// the init manager waits for listeners and their RDS (INITIALIZING), then LIVE. With
// initial_fetch_timeout 0 it waits forever.
type initState struct {
	cdsWanted, ldsWanted bool
	cdsDone, edsDone     bool
	ldsDone, rdsDone     bool
	ldsRequested         bool
	live                 bool
}

func (st *initState) clusterInit(s *Server) bool {
	if !st.cdsWanted {
		return true
	}
	return st.cdsDone && (st.edsDone || len(s.clusters.EDSNames()) == 0)
}

func (st *initState) listenerInit(s *Server) bool {
	if !st.ldsWanted {
		return true
	}
	return st.ldsDone && (st.rdsDone || len(s.rdsNames()) == 0)
}

// checkInitLocked advances initialization; s.mu is held.
func (s *Server) checkInitLocked() {
	if s.init.live {
		return
	}
	if !s.init.clusterInit(s) || !s.secretsReady(s.clusterTLS()) {
		return
	}
	if s.init.ldsWanted && !s.init.ldsRequested && s.xds != nil {
		s.init.ldsRequested = true
		s.xds.Watch(xdsclient.ListenerType)
	}
	if !s.init.listenerInit(s) || !s.secretsReady(s.listenerTLS()) {
		return
	}
	s.init.live = true
	close(s.liveCh)
	s.log.Info("all dependencies initialized. starting workers")
	s.stats.Named("server").Gauge("state").Set(int64(s.stateLocked()))
}

// initAfterRejected continues initialization after a response was rejected whole, as
// the onConfigUpdateFailed of Envoy's LdsApiImpl, CdsApiImpl, RDS subscriptions and EDS
// clusters do ("allow server startup to continue, even if we have a bad config"): the
// type counts as fetched.
func (s *Server) initAfterRejected(typeURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch typeURL {
	case xdsclient.ClusterType:
		s.init.cdsDone = true
	case xdsclient.ListenerType:
		s.init.ldsDone = true
	case xdsclient.RouteType:
		s.init.rdsDone = true
	case xdsclient.EndpointType:
		s.init.edsDone = true
	}
	s.checkInitLocked()
}

// initServerStats sets the server.* gauges that do not change.
func (s *Server) initServerStats() {
	sc := s.stats.Named("server")
	sc.Gauge("hot_restart_epoch").Set(int64(s.opts.RestartEpoch))
	sc.Gauge("concurrency").Set(int64(s.opts.Concurrency))
	sc.Gauge("hot_restart_generation").Set(1)
	s.refreshServerStats()
	s.stats.Named("listener_manager").Gauge("total_listeners_active")
	s.stats.Named("cluster_manager").Gauge("active_clusters")
	for _, p := range []string{"cluster_manager.cds", "listener_manager.lds"} {
		sc := s.stats.Named(p)
		sc.Counter("update_attempt")
		sc.Counter("update_success")
		sc.Counter("update_rejected")
	}
}

// refreshServerStats updates server.uptime, server.state and server.live, which Envoy
// refreshes on every stats flush.
func (s *Server) refreshServerStats() {
	sc := s.stats.Named("server")
	sc.Gauge("uptime").Set(int64(time.Since(s.start).Seconds()))
	state := s.State()
	sc.Gauge("state").Set(int64(state))
	live := int64(1)
	if s.healthFailed.Load() {
		live = 0
	}
	sc.Gauge("live").Set(live)
}
