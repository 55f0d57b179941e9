package cluster

import (
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// Manager holds the static clusters from the bootstrap and the dynamic ones from CDS, and
// the endpoints EDS delivered for them. Safe for concurrent use.
type Manager struct {
	store *stats.Store

	mu          sync.RWMutex
	clusters    map[string]*Cluster
	static      map[string]bool
	assignments map[string][]Host // by EDS service name
	active      *stats.Stat
	resolver    Resolver
	secrets     *tlsctx.Store
	internal    *internalconn.Registry
}

// NewManager returns an empty Manager counting into store.
func NewManager(store *stats.Store) *Manager {
	return &Manager{
		store:       store,
		clusters:    map[string]*Cluster{},
		static:      map[string]bool{},
		assignments: map[string][]Host{},
		active:      store.Named("cluster_manager").Gauge("active_clusters"),
		resolver:    NewDNSResolver(DefaultDNSServer),
		internal:    internalconn.NewRegistry(),
	}
}

// Internal returns the proxy's internal listeners, which endpoints with an
// envoy_internal_address connect to and the listener manager registers.
func (m *Manager) Internal() *internalconn.Registry { return m.internal }

// SetResolver replaces the resolver of STRICT_DNS clusters created from now on.
func (m *Manager) SetResolver(r Resolver) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resolver = r
}

// SetSecrets sets the SDS secrets that clusters created from now on use for upstream TLS.
func (m *Manager) SetSecrets(s *tlsctx.Store) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.secrets = s
}

// AddStatic adds the bootstrap's clusters.
func (m *Manager) AddStatic(cfgs []*Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cfg := range cfgs {
		c := newCluster(cfg, m.store)
		c.secrets, c.internal = m.secrets, m.internal
		c.startDNS(m.resolver)
		m.clusters[cfg.Name] = c
		m.static[cfg.Name] = true
	}
	m.active.Set(int64(len(m.clusters)))
}

// ApplyCDS replaces the dynamic clusters with cfgs (state of the world). A cluster whose
// configuration did not change keeps its connection pools.
func (m *Manager) ApplyCDS(cfgs []*Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[string]*Config{}
	for _, cfg := range cfgs {
		want[cfg.Name] = cfg
	}
	for name, c := range m.clusters {
		if m.static[name] {
			continue
		}
		if _, ok := want[name]; !ok {
			c.close()
			delete(m.clusters, name)
		}
	}
	for name, cfg := range want {
		if m.static[name] {
			continue
		}
		if old, ok := m.clusters[name]; ok && proto.Equal(old.cfg.Proto, cfg.Proto) {
			continue
		} else if ok {
			old.close()
		}
		c := newCluster(cfg, m.store)
		c.secrets, c.internal = m.secrets, m.internal
		if cfg.Type == TypeEDS {
			c.setHosts(m.assignments[cfg.ServiceName])
		}
		c.startDNS(m.resolver)
		m.clusters[name] = c
	}
	m.active.Set(int64(len(m.clusters)))
}

// ApplyEDS replaces the endpoints of every EDS service (state of the world for the
// subscribed names).
func (m *Manager) ApplyEDS(assignments map[string][]Host) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assignments = assignments
	for _, c := range m.clusters {
		if c.cfg.Type == TypeEDS {
			c.setHosts(assignments[c.cfg.ServiceName])
		}
	}
}

// Get returns the named cluster.
func (m *Manager) Get(name string) (*Cluster, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.clusters[name]
	return c, ok
}

// IsStatic reports whether the named cluster came from the bootstrap.
func (m *Manager) IsStatic(name string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.static[name]
}

// All returns every cluster sorted by name.
func (m *Manager) All() []*Cluster {
	m.mu.RLock()
	out := make([]*Cluster, 0, len(m.clusters))
	for _, c := range m.clusters {
		out = append(out, c)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
	return out
}

// EDSNames returns the sorted service names of the EDS clusters, the names to subscribe
// to over EDS.
func (m *Manager) EDSNames() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, c := range m.clusters {
		if c.cfg.Type == TypeEDS && !seen[c.cfg.ServiceName] {
			seen[c.cfg.ServiceName] = true
			out = append(out, c.cfg.ServiceName)
		}
	}
	sort.Strings(out)
	return out
}

// Close releases every pooled connection and stops DNS re-resolution.
func (m *Manager) Close() {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, c := range m.clusters {
		c.close()
	}
}
