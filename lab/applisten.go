package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/netns"
)

// A pod is ready once its app's process started (and its proxy, or ztunnel, has it), as
// a Kubernetes pod without a readiness probe is Ready once its containers run: nothing
// waits for the app to listen. On a loaded machine an app can take seconds to reach its
// listen, and a lab's first step sent traffic before it did (CI at load 70: ztunnel
// carried curl's ten connections to productpage over HBONE and found nothing on 9080).
// WaitAppsListening is the readiness a TCP probe on each containerPort would give, for
// the callers that run checks right after `up` (the lab runner).

// appListenPoll is how often WaitAppsListening looks again.
const appListenPoll = 20 * time.Millisecond

// WaitAppsListening waits until the app of every pod of l that declares container ports
// listens on each of them, in the pod's network namespace, or ctx ends; it then returns
// an error naming the pods and ports that do not listen. A gateway's pod (its proxy is
// its only process) is not waited for.
func WaitAppsListening(ctx context.Context, l *Lab) error {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	want := map[string][]uint16{} // by network namespace
	for _, p := range m.Pods {
		if p.Router || len(p.Ports) == 0 {
			continue
		}
		want[NamespaceName(l.opts.Name, p.Key())] = p.Ports
	}
	for {
		var missing []string
		for _, ns := range slices.Sorted(maps.Keys(want)) {
			listening, err := listeningPorts(ns)
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s (%v)", ns, err))
				continue
			}
			var left []uint16
			for _, port := range want[ns] {
				if !listening[port] {
					left = append(left, port)
				}
			}
			if len(left) == 0 {
				delete(want, ns)
				continue
			}
			missing = append(missing, fmt.Sprintf("%s port %v", ns, left))
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apps not listening on their container ports: %s: %w", strings.Join(missing, ", "), ctx.Err())
		case <-time.After(appListenPoll):
		}
	}
}

// listeningPorts returns the TCP ports something listens on in network namespace ns,
// read from the kernel's socket tables as the namespace's thread sees them (no
// connection is made: the app's access log and connection counts stay its own).
func listeningPorts(ns string) (map[uint16]bool, error) {
	out := map[uint16]bool{}
	err := netns.Do(ns, func() error {
		for _, table := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
			if err := readListening(table, out); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	return out, err
}

// readListening adds the local ports of the LISTEN sockets of a /proc/net/tcp table.
func readListening(path string, out map[uint16]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st ...; local_address is HEXIP:HEXPORT, st 0A LISTEN.
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" {
			continue
		}
		i := strings.LastIndexByte(fields[1], ':')
		if i < 0 {
			continue
		}
		port, err := strconv.ParseUint(fields[1][i+1:], 16, 16)
		if err != nil {
			continue
		}
		out[uint16(port)] = true
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
