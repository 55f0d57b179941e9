package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios/bugreport"
)

// againstCluster is diff's name of the cluster's config of a pod: the proxy's config
// dump in the bug report the lab was made from (up --from-bug-report keeps them).
const againstCluster = "cluster"

// clusterDiff compares the cluster's config of the lab pod ref, its proxy's dump in the
// bug report, with the lab proxy's own config dump: the dynamic listeners, routes,
// clusters and endpoints, by name and field. choice names the report's proxy
// ("<namespace>/<pod>"); "" lets bugreport.MatchProxy find the pod's own or its
// workload's.
func clusterDiff(ctx context.Context, g *globalFlags, ref, choice string) (api.ConfigDiff, error) {
	name, err := g.existingLab()
	if err != nil {
		return api.ConfigDiff{}, err
	}
	paths := lab.PathsFor(g.runRoot, name)
	r, err := lab.ReadRecord(paths)
	if err != nil {
		return api.ConfigDiff{}, fmt.Errorf("lab %s: %w", name, err)
	}
	p, err := r.FindPod(ref, "")
	if err != nil {
		return api.ConfigDiff{}, err
	}
	if !p.Sidecar {
		return api.ConfigDiff{}, fmt.Errorf("pod %s: %w", p.Key, api.ErrNoSidecar)
	}
	kept, err := bugreport.KeptProxies(paths.Dir)
	if err != nil {
		return api.ConfigDiff{}, err
	}
	proxy := choice
	if proxy == "" {
		if proxy, err = bugreport.MatchProxy(kept, p.Namespace, p.Name, p.Workload); err != nil {
			return api.ConfigDiff{}, fmt.Errorf("diff %s --against=%s: %w", ref, againstCluster, err)
		}
	} else if !slices.Contains(kept, proxy) {
		return api.ConfigDiff{}, fmt.Errorf("diff %s --against=%s/%s: the lab keeps no dump of %s (it keeps: %s)", ref, againstCluster, proxy, proxy, strings.Join(kept, ", "))
	}
	theirs, err := bugreport.KeptDump(paths.Dir, proxy)
	if err != nil {
		return api.ConfigDiff{}, err
	}
	ours, err := fetchAdmin(ctx, paths.AgentSocket(p.Key), bugreport.DumpFile)
	if err != nil {
		return api.ConfigDiff{}, fmt.Errorf("read the config of %s's proxy: %w", p.Key, err)
	}
	a, err := bugreport.DumpResources(theirs)
	if err != nil {
		return api.ConfigDiff{}, fmt.Errorf("the bug report's dump of %s: %w", proxy, err)
	}
	b, err := bugreport.DumpResources(ours)
	if err != nil {
		return api.ConfigDiff{}, fmt.Errorf("the config dump of %s's proxy: %w", p.Key, err)
	}
	return lab.DiffDecoded(p.Key, againstCluster+" "+proxy, "lab", a, b), nil
}
