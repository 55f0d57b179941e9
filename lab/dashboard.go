package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/meshlab/meshlab/web"
)

// DefaultListen is where the dashboard and the API are served on TCP by default.
const DefaultListen = "127.0.0.1:15080"

// DashboardURLFile is the file in the run directory (0600) holding the dashboard's
// login URL, for `meshlab dashboard`.
func (p Paths) DashboardURLFile() string { return filepath.Join(p.Dir, "dashboard.url") }

// ParseListen checks a --listen address: a specific IP and a port. A wildcard address is
// refused because every request must name the listen address in its Host header.
func ParseListen(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("--listen %q: want ip:port, e.g. %s: %w", s, DefaultListen, err)
	}
	if ap.Addr().IsUnspecified() {
		return ap, fmt.Errorf("--listen %q: name one address (browsers must send it as the Host header), not a wildcard", s)
	}
	return ap, nil
}

// features are the API routes the lab adds to the core ones: the dashboard's, and the
// guide's when Options.Guide is set.
func (l *Lab) features() []web.Routes {
	fs := []web.Routes{
		web.EventRoutes(l.bus), web.TopologyRoutes(l), web.InspectRoutes(l), web.TrafficRoutes(l),
		web.ConfigRoutes(l, l), web.ProxyRoutes(l), web.FaultRoutes(l), web.HistoryRoutes(l),
		web.CARoutes(l), web.TraceRoutes(l), // lab/carotate.go, lab/trace.go
		web.SecretsRoutes(l),                           // lab/secrets.go
		web.KubeRoutes(l),                              // lab/kubeview.go
		web.ServiceRoutes(l),                           // lab/describeservice.go
		web.SyncRoutes(syncWaiter{l}),                  // lab/apply.go
		web.ZtunnelRoutes(ztunnelAdmin{l}),             // lab/ztunnel.go
		web.IstiodRoutes(istiodView{l}),                // lab/istiod.go
		web.ControlPlaneRoutes(controlPlaneRestart{l}), // lab/cprestart.go
	}
	if l.opts.Guide != nil {
		fs = append(fs, web.GuideRoutes(l.opts.Guide))
	}
	return fs
}

// listenDashboard opens the dashboard's TCP listener: Options.Listen, or, when that is
// taken and ListenFallback is set, any free port on the same address.
func (l *Lab) listenDashboard() (net.Listener, error) {
	ap, err := ParseListen(l.opts.Listen)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil && l.opts.ListenFallback && errors.Is(err, syscall.EADDRINUSE) {
		l.log.Info("dashboard address taken; using a free port", "addr", ap)
		ln, err = net.Listen("tcp", netip.AddrPortFrom(ap.Addr(), 0).String())
	}
	if err != nil {
		return nil, fmt.Errorf("listen for the dashboard on %s: %w", ap, err)
	}
	return ln, nil
}

// serveDashboard serves the dashboard and the API on TCP behind a session token, and
// records the login URL.
func (l *Lab) serveDashboard(ctx context.Context, api http.Handler) error {
	ln, err := l.listenDashboard()
	if err != nil {
		return err
	}
	token, err := newToken()
	if err != nil {
		ln.Close()
		return err
	}
	g := web.Guard{Token: token, Addr: ln.Addr().String()}
	l.dashURL = g.LoginURL()
	if err := os.WriteFile(l.paths.DashboardURLFile(), []byte(l.dashURL+"\n"), 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("record dashboard URL: %w", err)
	}
	if w := exposureWarning(g.Addr); w != "" {
		fmt.Fprintln(l.out, w)
	}
	h := web.Dashboard(api, g)
	l.servers.Add(1)
	go func() {
		defer l.servers.Done()
		if err := web.Serve(ctx, ln, h); err != nil && !errors.Is(err, net.ErrClosed) {
			l.log.Error("dashboard stopped", "err", err)
		}
	}()
	return nil
}

// exposureWarning returns the warning printed when the dashboard listens on addr, or ""
// for a loopback address.
func exposureWarning(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().IsLoopback() {
		return ""
	}
	return "WARNING: the dashboard listens on " + addr + ", which is not a loopback address: " +
		"anyone who can reach it and learns the URL controls this lab as root"
}

// DashboardURL returns the dashboard's login URL (with the session token), or "" when
// the lab serves no dashboard.
func (l *Lab) DashboardURL() string { return l.dashURL }

func newToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make session token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ReadDashboardURL returns the login URL the lab at p recorded.
func ReadDashboardURL(p Paths) (string, error) {
	b, err := os.ReadFile(p.DashboardURLFile())
	if err != nil {
		return "", fmt.Errorf("read dashboard URL: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
