package demoapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The squid persona stands in for the sameersbn/squid image of the http-proxy egress task
// (tasks/traffic-management/egress/http-proxy): an HTTP forward proxy outside the mesh.
// It reads the pod's /etc/squid/squid.conf (the task's ConfigMap volume) for the
// directives that task writes, tunnels CONNECT (the task's HTTPS_PROXY curl) and
// forwards absolute-URI HTTP requests, applies the http_access rules in order as squid
// does, and appends a line per transaction to /var/log/squid/access.log in squid's
// native format, which the task tails with `kubectl exec ... -- tail`. A directive it
// does not implement stops it at start with the line that has it, as squid -k parse
// stops on an unknown directive, rather than be ignored.

// PersonaSquid is the forward proxy of sameersbn/squid.
const PersonaSquid = "squid"

// squidConfPath and SquidLogDir are where the image keeps its configuration and logs.
const (
	squidConfPath = "/etc/squid/squid.conf"
	// SquidLogDir is the directory of squid's access.log in the pod (the lab binds a
	// writable directory of the pod's there).
	SquidLogDir = "/var/log/squid"
)

// squidDefaultPort is squid's http_port when the configuration names none.
const squidDefaultPort = 3128

// squidACL is one acl: a name and what it matches (one kind per name, as squid wants).
type squidACL struct {
	kind   string // "port", "method", "src", or the built-ins "all" and "manager"
	ports  [][2]uint16
	values []string       // methods
	nets   []netip.Prefix // src
}

// squidRule is an http_access line: allow or deny when every acl holds (a "!" negates).
type squidRule struct {
	allow bool
	acls  []string // "!NAME" negated
	line  int
}

// squidConf is what the persona read of squid.conf.
type squidConf struct {
	port  uint16
	acls  map[string]*squidACL
	rules []squidRule
}

// squidRequest is what http_access rules look at.
type squidRequest struct {
	method string
	port   uint16
	src    netip.Addr
	path   string // the request's path, for the manager acl
}

// builtinSquidACLs are the acls squid predefines (squid 3.5's "all", "localhost",
// "manager"; "localnet", "SSL_ports" and "Safe_ports" come from the default squid.conf).
func builtinSquidACLs() map[string]*squidACL {
	return map[string]*squidACL{
		"all":       {kind: "all"},
		"localhost": {kind: "src", nets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}},
		"manager":   {kind: "manager"},
	}
}

// squidDefaultConf is the sameersbn/squid image's own configuration, used when the pod
// mounts none: its access rules and port.
const squidDefaultConf = `http_port 3128
acl localnet src 10.0.0.0/8
acl localnet src 172.16.0.0/12
acl localnet src 192.168.0.0/16
acl SSL_ports port 443
acl CONNECT method CONNECT
http_access deny CONNECT !SSL_ports
http_access allow localhost manager
http_access deny manager
http_access allow localnet
http_access allow localhost
http_access deny all
`

// parseSquidConf reads squid.conf's directives; name is the file, for errors.
func parseSquidConf(name, text string) (*squidConf, error) {
	c := &squidConf{acls: builtinSquidACLs()}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("squid: %s line %d: %s: %s", name, n, f[0], fmt.Sprintf(format, a...))
		}
		switch f[0] {
		case "http_port":
			if len(f) != 2 {
				return nil, fail("takes one [address:]port (options such as ssl-bump are not supported by meshlab's squid)")
			}
			p := f[1]
			if i := strings.LastIndexByte(p, ':'); i >= 0 {
				p = p[i+1:]
			}
			port, err := strconv.ParseUint(p, 10, 16)
			if err != nil || port == 0 {
				return nil, fail("%q is not a port", f[1])
			}
			if c.port != 0 {
				return nil, fail("meshlab's squid listens on one http_port")
			}
			c.port = uint16(port)
		case "acl":
			if len(f) < 4 {
				return nil, fail("takes a name, a type and values")
			}
			a, err := squidACLValues(c.acls[f[1]], f[2], f[3:])
			if err != nil {
				return nil, fail("%s %s: %v", f[1], f[2], err)
			}
			c.acls[f[1]] = a
		case "http_access":
			if len(f) < 3 || f[1] != "allow" && f[1] != "deny" {
				return nil, fail("takes allow or deny and acl names")
			}
			for _, a := range f[2:] {
				if c.acls[strings.TrimPrefix(a, "!")] == nil {
					return nil, fail("acl %q is not defined", strings.TrimPrefix(a, "!"))
				}
			}
			c.rules = append(c.rules, squidRule{allow: f[1] == "allow", acls: f[2:], line: n})
		case "coredump_dir", "max_filedescriptors":
			// Where a crash dumps core and the descriptor limit: nothing a lab's
			// requests can observe; read so the task's file loads as squid loads it.
		default:
			return nil, fail("is not a directive meshlab's squid implements (it reads http_port, acl port|method|src, http_access, coredump_dir, max_filedescriptors)")
		}
	}
	if c.port == 0 {
		c.port = squidDefaultPort
	}
	return c, nil
}

// squidACLValues adds values of kind to acl (nil for a new one).
func squidACLValues(a *squidACL, kind string, values []string) (*squidACL, error) {
	if a == nil {
		a = &squidACL{kind: kind}
	} else if a.kind != kind {
		return nil, fmt.Errorf("the acl is already of type %s", a.kind)
	}
	for _, v := range values {
		switch kind {
		case "port":
			lo, hi, isRange := strings.Cut(v, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.ParseUint(lo, 10, 16)
			h, err2 := strconv.ParseUint(hi, 10, 16)
			if err1 != nil || err2 != nil || l > h {
				return nil, fmt.Errorf("%q is not a port or a range of ports", v)
			}
			a.ports = append(a.ports, [2]uint16{uint16(l), uint16(h)})
		case "method":
			a.values = append(a.values, strings.ToUpper(v))
		case "src":
			p, err := netip.ParsePrefix(v)
			if err != nil {
				addr, err2 := netip.ParseAddr(v)
				if err2 != nil {
					return nil, fmt.Errorf("%q is not an address or a CIDR", v)
				}
				p = netip.PrefixFrom(addr, addr.BitLen())
			}
			a.nets = append(a.nets, p.Masked())
		default:
			return nil, errors.New("is not an acl type meshlab's squid implements (port, method, src)")
		}
	}
	return a, nil
}

// matches reports whether acl a holds for r.
func (a *squidACL) matches(r squidRequest) bool {
	switch a.kind {
	case "all":
		return true
	case "manager":
		// squid's cache manager: cache_object:// URLs and /squid-internal-mgr/.
		return strings.HasPrefix(r.path, "/squid-internal-mgr/")
	case "port":
		for _, p := range a.ports {
			if r.port >= p[0] && r.port <= p[1] {
				return true
			}
		}
	case "method":
		for _, m := range a.values {
			if m == r.method {
				return true
			}
		}
	case "src":
		for _, n := range a.nets {
			if n.Contains(r.src.Unmap()) {
				return true
			}
		}
	}
	return false
}

// allowed applies the http_access rules in order, as squid: the first rule whose acls all
// hold decides; when none does, the opposite of the last rule's action (deny without
// rules).
func (c *squidConf) allowed(r squidRequest) bool {
	for _, rule := range c.rules {
		all := true
		for _, name := range rule.acls {
			neg := strings.HasPrefix(name, "!")
			if c.acls[strings.TrimPrefix(name, "!")].matches(r) == neg {
				all = false
				break
			}
		}
		if all {
			return rule.allow
		}
	}
	if len(c.rules) == 0 {
		return false
	}
	return !c.rules[len(c.rules)-1].allow
}

// readSquidConf reads root's etc/squid/squid.conf, or the image's default without one.
func readSquidConf(root string) (*squidConf, error) {
	if root != "" {
		b, err := os.ReadFile(filepath.Join(root, squidConfPath))
		if err == nil {
			return parseSquidConf(squidConfPath, string(b))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("squid: read %s: %w", squidConfPath, err)
		}
	}
	return parseSquidConf("the image's squid.conf", squidDefaultConf)
}

// squidProxy serves the proxy: its configuration and the access log it appends to.
type squidProxy struct {
	conf   *squidConf
	dialer net.Dialer
	client *http.Client
	mu     sync.Mutex
	log    io.Writer
	now    func() time.Time
}

// serveSquid serves the squid persona until ctx ends: the configuration under volumeRoot
// (or the image's), the access log in SquidLogDir.
func serveSquid(ctx context.Context, volumeRoot string, log *slog.Logger) error {
	conf, err := readSquidConf(volumeRoot)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(SquidLogDir, "access.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("squid: open the access log: %w", err)
	}
	defer f.Close()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(conf.port))))
	if err != nil {
		return fmt.Errorf("squid: listen on http_port %d: %w", conf.port, err)
	}
	log.Info("listening", "addr", ln.Addr().String(), "rules", len(conf.rules))
	p := newSquidProxy(conf, f)
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("squid: %w", err)
	}
	return nil
}

func newSquidProxy(conf *squidConf, log io.Writer) *squidProxy {
	p := &squidProxy{conf: conf, log: log, now: time.Now}
	p.client = &http.Client{
		Transport: &http.Transport{Proxy: nil, DialContext: p.dialer.DialContext},
		// A forward proxy hands redirects back to its client.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p
}

// logLine appends a line in squid's native format: time, elapsed ms, client, code/status,
// bytes, method, URL, user, hierarchy/peer, type.
func (p *squidProxy) logLine(start time.Time, client, code string, status int, bytes int64, method, url, peer, mime string) {
	end := p.now()
	hier := "HIER_NONE/-"
	if peer != "" {
		hier = "HIER_DIRECT/" + peer
	}
	if mime == "" {
		mime = "-"
	}
	line := fmt.Sprintf("%d.%03d %6d %s %s/%03d %d %s %s - %s %s\n",
		end.Unix(), end.Nanosecond()/1e6, end.Sub(start).Milliseconds(), client, code, status, bytes, method, url, hier, mime)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.log, line)
}

func (p *squidProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := p.now()
	client, _, _ := net.SplitHostPort(r.RemoteAddr)
	src, _ := netip.ParseAddr(client)
	req := squidRequest{method: r.Method, src: src, path: r.URL.Path}
	target := r.Host
	if r.Method != http.MethodConnect {
		target = r.URL.Host
	}
	if _, port, err := net.SplitHostPort(target); err == nil {
		n, _ := strconv.ParseUint(port, 10, 16)
		req.port = uint16(n)
	} else if r.URL.Scheme == "https" {
		req.port = 443
	} else {
		req.port = 80
	}
	url := r.URL.String()
	if r.Method == http.MethodConnect {
		url = r.Host
	}
	if r.Method != http.MethodConnect && !r.URL.IsAbs() && !p.conf.acls["manager"].matches(req) {
		http.Error(w, "squid: ERR_INVALID_URL: a proxy takes an absolute URL or CONNECT", http.StatusBadRequest)
		p.logLine(start, client, "TAG_NONE", http.StatusBadRequest, 0, r.Method, url, "", "text/html")
		return
	}
	if !p.conf.allowed(req) {
		http.Error(w, "squid: ERR_ACCESS_DENIED: access denied by http_access", http.StatusForbidden)
		p.logLine(start, client, "TCP_DENIED", http.StatusForbidden, 0, r.Method, url, "", "text/html")
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, start, client)
		return
	}
	p.forward(w, r, start, client)
}

// tunnel answers CONNECT: dial the target, say 200, splice until both sides close.
func (p *squidProxy) tunnel(w http.ResponseWriter, r *http.Request, start time.Time, client string) {
	up, err := p.dialer.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, "squid: ERR_CONNECT_FAIL: "+err.Error(), http.StatusServiceUnavailable)
		p.logLine(start, client, "TCP_TUNNEL", http.StatusServiceUnavailable, 0, r.Method, r.Host, "", "")
		return
	}
	defer up.Close()
	peer, _, _ := net.SplitHostPort(up.RemoteAddr().String())
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "squid: cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// What the client sent before the 200 (buffered) goes first.
		_, _ = io.Copy(up, io.MultiReader(io.LimitReader(buf, int64(buf.Reader.Buffered())), down))
		if c, ok := up.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
	})
	n, _ := io.Copy(down, up)
	if c, ok := down.(*net.TCPConn); ok {
		_ = c.CloseWrite()
	}
	wg.Wait()
	p.logLine(start, client, "TCP_TUNNEL", http.StatusOK, n, http.MethodConnect, r.Host, peer, "")
}

// forward sends an absolute-URI request on and copies the answer back.
func (p *squidProxy) forward(w http.ResponseWriter, r *http.Request, start time.Time, client string) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Connection")
	var peer string
	ctx := withPeer(r.Context(), &peer)
	resp, err := p.client.Do(out.WithContext(ctx))
	if err != nil {
		http.Error(w, "squid: ERR_CONNECT_FAIL: "+err.Error(), http.StatusServiceUnavailable)
		p.logLine(start, client, "TCP_MISS", http.StatusServiceUnavailable, 0, r.Method, r.URL.String(), "", "text/html")
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	p.logLine(start, client, "TCP_MISS", resp.StatusCode, n, r.Method, r.URL.String(), peer, resp.Header.Get("Content-Type"))
}

// withPeer returns ctx tracing the connection a request goes out on into *peer (its
// remote address, the log's HIER_DIRECT/<ip>).
func withPeer(ctx context.Context, peer *string) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		*peer, _, _ = net.SplitHostPort(info.Conn.RemoteAddr().String())
	}})
}
