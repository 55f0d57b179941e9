package trace

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/ztunnel/accesslog"
)

// An ambient pod's request is explained from the node's ztunnel, which has no config
// dump of listeners and routes to walk and no x-request-id to find (it is L4): its access
// log has one "connection complete" line per connection and side. The source side's
// line is the one whose src.addr is the traced connection's own address (the trace dials
// it from the pod's namespace and knows its port); the destination side's is the inbound
// line for the same target (dst.hbone_addr over HBONE, dst.addr in plaintext) from the
// source pod's address, the last one written after the request began. ztunnel writes a
// line when the connection closes, just after the client has its answer, so the trace
// polls for the lines as it does for a sidecar's.

// ztunnelLog is the part of the ztunnel's log written since a trace began.
type ztunnelLog struct {
	path   string
	offset int64
}

// ztunnelLogFrom notes where the ztunnel's log ends now; a lab without ztunnel gives a
// log that never has a line.
func ztunnelLogFrom(d Deps) ztunnelLog {
	if d.Ztunnel() == nil {
		return ztunnelLog{}
	}
	l := ztunnelLog{path: d.ZtunnelLogFile()}
	if st, err := os.Stat(l.path); err == nil {
		l.offset = st.Size()
	}
	return l
}

// records returns the access log records written since the offset, in order.
func (l ztunnelLog) records() []accesslog.Record {
	if l.path == "" {
		return nil
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() < l.offset {
		return nil // rotated or truncated: nothing to trust
	}
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil
	}
	var out []accesslog.Record
	sc := bufio.NewScanner(io.LimitReader(f, logTail))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if r, ok := accesslog.Parse(sc.Text()); ok && r.Target == "access" && r.Message == "connection complete" {
			r.Fields["_raw"] = sc.Text()
			out = append(out, r)
		}
	}
	return out
}

// ztunnelLines are a traced connection's two access log lines, nil where not found.
type ztunnelLines struct {
	outbound, inbound *accesslog.Record
}

// findZtunnelLines polls the ztunnel's log for the traced connection's lines: the
// outbound one when the source is ambient (src.addr is local), the inbound one when the
// destination is (from the source pod's address to the destination's target), until
// both wanted are there or accessLogWait ends.
func findZtunnelLines(ctx context.Context, l ztunnelLog, local netip.AddrPort, src *model.Pod, wantOut, wantIn bool, dst *model.Pod) ztunnelLines {
	var z ztunnelLines
	if l.path == "" || (!wantOut && !wantIn) {
		return z
	}
	ctx, cancel := context.WithTimeout(ctx, accessLogWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		z = matchZtunnelLines(l.records(), local, src, dst)
		if (!wantOut || z.outbound != nil) && (!wantIn || z.inbound != nil) {
			return z
		}
		select {
		case <-ctx.Done():
			return z
		case <-tick.C:
		}
	}
}

// matchZtunnelLines picks the traced connection's lines from recs (see the package's
// note above on how).
func matchZtunnelLines(recs []accesslog.Record, local netip.AddrPort, src, dst *model.Pod) ztunnelLines {
	var z ztunnelLines
	target := ""
	for i := range recs {
		r := &recs[i]
		if r.Fields["direction"] == "outbound" && local.IsValid() && r.Fields["src.addr"] == local.String() {
			z.outbound = r
			target = cmpOr(r.Fields["dst.hbone_addr"], r.Fields["dst.addr"])
		}
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := &recs[i]
		if r.Fields["direction"] != "inbound" {
			continue
		}
		from, err := netip.ParseAddrPort(r.Fields["src.addr"])
		if err != nil || src == nil || from.Addr() != src.IP {
			continue
		}
		to := cmpOr(r.Fields["dst.hbone_addr"], r.Fields["dst.addr"])
		switch {
		case target != "" && to == target:
		case target == "" && dst != nil && strings.HasPrefix(to, dst.IP.String()+":"):
		default:
			continue
		}
		z.inbound = r
		break
	}
	return z
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ztunnelHop explains one side of ztunnel's handling of the traced connection from its
// access log line; pod is the ambient pod whose namespace that side's sockets are in.
func ztunnelHop(z *model.Pod, pod *model.Pod, direction string, r *accesslog.Record) api.TraceHop {
	h := api.TraceHop{Kind: api.HopZtunnel, Pod: z.Key(), Direction: direction}
	if r == nil {
		h.Notes = "ztunnel wrote no access log line for this connection in time (see meshlab logs " + z.Name + " -n " + z.Namespace + ")"
		return h
	}
	f := r.Fields
	h.AccessLog = f["_raw"]
	hbone := f["dst.hbone_addr"] != ""
	h.Protocol = "TCP"
	if hbone {
		h.Protocol = "HBONE"
	}
	if d, ok := strings.CutSuffix(f["duration"], "ms"); ok {
		var n int
		if _, err := fmt.Sscan(d, &n); err == nil {
			h.DurationMs = &n
		}
	}
	where := pod.Key() + "'s network namespace"
	switch direction {
	case "outbound":
		h.Listener = &api.TraceResource{Name: "outbound 15001 (in " + where + ")"}
		h.Endpoint = f["dst.addr"]
		if hbone {
			h.Target = f["dst.hbone_addr"]
			h.MTLS, h.PeerIdentity = true, f["dst.identity"]
			h.Notes = fmt.Sprintf("istio-cni's rule redirected the connection to ztunnel's 15001; ztunnel chose %s and opened an HBONE tunnel (HTTP/2 CONNECT over mTLS) to %s with :authority %s",
				destinationName(f), f["dst.addr"], f["dst.hbone_addr"])
		} else {
			h.Notes = fmt.Sprintf("istio-cni's rule redirected the connection to ztunnel's 15001; the destination %s does not speak HBONE, so ztunnel connected to it in plaintext", f["dst.addr"])
		}
	case "inbound":
		port := "15006 (plaintext)"
		if hbone {
			port = "15008 (HBONE)"
		}
		h.Listener = &api.TraceResource{Name: "inbound " + port + " (in " + where + ")"}
		h.Endpoint = cmpOr(f["dst.hbone_addr"], f["dst.addr"])
		h.MTLS, h.PeerIdentity = hbone, f["src.identity"]
		h.RBAC = "allowed"
		if e := f["error"]; strings.Contains(e, "policy rejection") {
			h.RBAC, h.Notes = "denied", "ztunnel's L4 authorization refused the connection: "+e
		} else if e != "" {
			h.Notes = "the connection failed: " + e
		} else {
			h.Notes = "ztunnel's L4 authorization allowed the connection; ztunnel connected to the app keeping the caller's address"
		}
	}
	if e := f["error"]; e != "" && h.Notes == "" {
		h.Notes = "the connection failed: " + e
	}
	return h
}

// destinationName names the line's destination: its workload and service.
func destinationName(f map[string]string) string {
	name := f["dst.workload"]
	if s := f["dst.service"]; s != "" {
		name += " of " + s
	}
	if name == "" {
		return "the destination"
	}
	return "workload " + name
}

// ambientCaptureNote explains an ambient pod's capture hop.
func ambientCaptureNote(outbound bool) string {
	if outbound {
		return "istio-cni's in-pod rules (nat ISTIO_OUTPUT) redirect the app's connection to ztunnel's 15001, which listens inside this pod's namespace"
	}
	return "the HBONE tunnel arrives on 15008, which istio-cni's ISTIO_PRERT does not redirect; ztunnel's own dial to the app (mark 0x539) passes ISTIO_OUTPUT unredirected"
}
