package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/netns/capture"
)

// logTailBytes bounds how much of a log file is read for its tail.
const logTailBytes = 256 << 10

// InspectPod implements web.PodInspector.
func (l *Lab) InspectPod(ctx context.Context, pod string, lines int) (api.PodInspection, error) {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	p, err := m.LookupPod(pod)
	if err != nil {
		return api.PodInspection{}, fmt.Errorf("%w (%w)", err, api.ErrUnknownPod)
	}
	if p == nil {
		return api.PodInspection{}, api.ErrUnknownPod
	}
	pod = p.Key()
	out := api.PodInspection{Pod: pod, XDS: []api.XDSTypeState{}, Logs: map[string][]string{}}
	dir := l.paths.PodDir(pod)
	for _, name := range []string{"proxy", "app", "agent"} {
		out.Logs[name] = tailLines(dir+"/"+name+".log", lines)
	}
	if !p.Sidecar.Inject {
		return out, nil
	}
	c := l.agentClient(pod)
	defer c.Close()
	if st, err := c.Status(ctx); err != nil {
		out.AgentError = err.Error()
	} else {
		out.Agent = &st
	}
	if rules, err := capture.Save(NamespaceName(l.opts.Name, pod)); err != nil {
		out.CaptureError = err.Error()
	} else {
		out.Capture = rules
	}
	for _, ps := range l.disc.Status() {
		if ps.NodeID != p.NodeID() {
			continue
		}
		out.XDSConnected = ps.Connected
		for typeURL, ts := range ps.Types {
			x := api.XDSTypeState{TypeURL: typeURL, Sent: ts.Sent, Acked: ts.Acked, Nonce: ts.Nonce, Synced: ts.Synced(), NackError: ts.NackError}
			if !ts.LastNack.IsZero() {
				at := ts.LastNack
				x.LastNack = &at
			}
			out.XDS = append(out.XDS, x)
		}
	}
	sort.Slice(out.XDS, func(i, j int) bool { return out.XDS[i].TypeURL < out.XDS[j].TypeURL })
	return out, nil
}

// tailLines returns the last n lines of the file (none when it does not exist).
func tailLines(path string, n int) []string {
	out := []string{}
	if n == 0 {
		return out
	}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTailBytes {
		if _, err := f.Seek(-logTailBytes, io.SeekEnd); err != nil {
			return out
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, logTailBytes))
	if err != nil && !errors.Is(err, io.EOF) {
		return out
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) == 1 && all[0] == "" {
		return out
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return append(out, all...)
}
