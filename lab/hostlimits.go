package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// neighGCThresh3 is the host's hard limit on neighbour (ARP) entries. The neighbour
// table is one for the whole machine, every network namespace's entries counted in it,
// and only the host's root namespace may set it: a lab cannot raise it in its own
// namespaces.
const neighGCThresh3 = "/proc/sys/net/ipv4/neigh/default/gc_thresh3"

// neighEntriesPerPod is how many neighbour entries a pod costs once it talks to one
// other pod: its entry for the peer, and the peer's for it. Measured at 400 pods on a
// host with gc_thresh3 1024: each pod sending to its next pod left 800 entries, to its
// next two the table stopped at 1024, the kernel logged "neighbour: arp_cache: neighbor
// table overflow!" and new connections between pods failed (docs/BENCHMARKS.md, "500
// pods (issue 16)").
const neighEntriesPerPod = 2

// neighbourWarning is the line `up` prints when pods could fill the host's neighbour
// table, whose limit is thresh3 (gc_thresh3), or "" when they cannot.
func neighbourWarning(pods, thresh3 int) string {
	need := pods * neighEntriesPerPod
	if thresh3 <= 0 || need <= thresh3 {
		return ""
	}
	return fmt.Sprintf("warning: %d pods need about %d neighbour (ARP) entries once each talks to one other pod, "+
		"more than the host's limit net.ipv4.neigh.default.gc_thresh3 = %d (one table for every namespace; a lab cannot raise it): "+
		"connections between pods will fail and dmesg will say \"neighbor table overflow\"; raise it on the host, e.g. "+
		"sudo sysctl -w net.ipv4.neigh.default.gc_thresh1=%d net.ipv4.neigh.default.gc_thresh2=%d net.ipv4.neigh.default.gc_thresh3=%d",
		pods, need, thresh3, 2*need, 4*need, 8*need)
}

// hostNeighbourWarning is neighbourWarning for this host; "" when its limit cannot be
// read (no IPv4, no /proc): the lab then finds out as it would have anyway.
func hostNeighbourWarning(pods int) string {
	b, err := os.ReadFile(neighGCThresh3)
	if err != nil {
		return ""
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return ""
	}
	return neighbourWarning(pods, n)
}
