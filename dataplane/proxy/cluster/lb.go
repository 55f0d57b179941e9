package cluster

import (
	"math/rand/v2"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// LBPolicy is a cluster's load balancing policy.
type LBPolicy int

// Supported load balancing policies.
const (
	LBRoundRobin LBPolicy = iota
	LBLeastRequest
	LBRandom
	LBClusterProvided
)

// String returns Envoy's name of the policy.
func (p LBPolicy) String() string {
	switch p {
	case LBLeastRequest:
		return "LEAST_REQUEST"
	case LBRandom:
		return "RANDOM"
	case LBClusterProvided:
		return "CLUSTER_PROVIDED"
	}
	return "ROUND_ROBIN"
}

func lbPolicyFrom(p clusterv3.Cluster_LbPolicy) LBPolicy {
	switch p {
	case clusterv3.Cluster_LEAST_REQUEST:
		return LBLeastRequest
	case clusterv3.Cluster_RANDOM:
		return LBRandom
	case clusterv3.Cluster_CLUSTER_PROVIDED:
		return LBClusterProvided
	}
	return LBRoundRobin
}

// choose picks one of hosts (never empty) by the cluster's policy. LEAST_REQUEST is
// Envoy's default for equal weights: the power of two choices, two hosts drawn at random
// (with replacement), the one with fewer active requests wins.
func (c *Cluster) choose(hosts []Host) Host {
	n := len(hosts)
	switch c.cfg.LB {
	case LBRandom:
		return hosts[rand.IntN(n)]
	case LBLeastRequest:
		a, b := hosts[rand.IntN(n)], hosts[rand.IntN(n)]
		if c.hostState(b).rqActive.Load() < c.hostState(a).rqActive.Load() {
			return b
		}
		return a
	}
	return hosts[(c.next.Add(1)-1)%uint64(n)]
}

// available returns the hosts the load balancer may use: the healthy, non-ejected hosts,
// or every host when their share is below the panic threshold (Envoy's panic mode,
// counted as lb_healthy_panic).
func (c *Cluster) available(hs *hostSet) []Host {
	if hs == nil || len(hs.all) == 0 {
		return nil
	}
	ok := hs.healthy
	if c.outlier != nil { // only outlier detection ejects hosts
		ok = nil
		for _, h := range hs.healthy {
			if !c.hostState(h).ejected.Load() {
				ok = append(ok, h)
			}
		}
	}
	if float64(len(ok))*100 < c.cfg.PanicThreshold*float64(len(hs.all)) {
		c.stats.LBHealthyPanic.Inc()
		return hs.all
	}
	return ok
}
