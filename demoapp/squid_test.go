package demoapp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The http-proxy task's proxy.conf, as its page writes it.
const taskSquidConf = `http_port 3128

acl SSL_ports port 443
acl CONNECT method CONNECT

http_access deny CONNECT !SSL_ports
http_access allow localhost manager
http_access deny manager
http_access allow all

coredump_dir /var/spool/squid

max_filedescriptors 1024
`

func TestSquidConfRules(t *testing.T) {
	t.Parallel()
	c, err := parseSquidConf("squid.conf", taskSquidConf)
	if err != nil {
		t.Fatal(err)
	}
	if c.port != 3128 {
		t.Errorf("http_port %d, want 3128", c.port)
	}
	pod := netip.MustParseAddr("10.244.0.7")
	for _, tc := range []struct {
		name string
		r    squidRequest
		want bool
	}{
		{"CONNECT to 443", squidRequest{method: "CONNECT", port: 443, src: pod}, true},
		{"CONNECT to 22 (not SSL_ports)", squidRequest{method: "CONNECT", port: 22, src: pod}, false},
		{"GET on 80", squidRequest{method: "GET", port: 80, src: pod}, true},
		{"manager from a pod", squidRequest{method: "GET", port: 3128, src: pod, path: "/squid-internal-mgr/info"}, false},
		{"manager from localhost", squidRequest{method: "GET", port: 3128, src: netip.MustParseAddr("127.0.0.1"), path: "/squid-internal-mgr/info"}, true},
	} {
		if got := c.allowed(tc.r); got != tc.want {
			t.Errorf("%s: allowed %v, want %v", tc.name, got, tc.want)
		}
	}
	// The image's own configuration: pods' private addresses (localnet) allowed, the
	// rest denied by its last rule.
	d, err := parseSquidConf("default", squidDefaultConf)
	if err != nil {
		t.Fatal(err)
	}
	if !d.allowed(squidRequest{method: "CONNECT", port: 443, src: pod}) || d.allowed(squidRequest{method: "CONNECT", port: 443, src: netip.MustParseAddr("8.8.8.8")}) {
		t.Error("the image's squid.conf allows localnet and denies the rest")
	}
	// No rule matching: the opposite of the last rule's action.
	e, err := parseSquidConf("s", "acl a src 10.0.0.0/8\nhttp_access deny a\n")
	if err != nil {
		t.Fatal(err)
	}
	if !e.allowed(squidRequest{method: "GET", port: 80, src: netip.MustParseAddr("192.168.0.1")}) {
		t.Error("a request no rule matches takes the opposite of the last rule (allow after deny)")
	}
}

func TestSquidConfRefusals(t *testing.T) {
	t.Parallel()
	for conf, want := range map[string]string{
		"cache_peer parent.example 3128 0\n":       "squid: squid.conf line 1: cache_peer: is not a directive meshlab's squid implements",
		"http_access allow nobody\n":               `squid: squid.conf line 1: http_access: acl "nobody" is not defined`,
		"acl x dstdomain .example.com\n":           "squid: squid.conf line 1: acl: x dstdomain: is not an acl type meshlab's squid implements",
		"http_port 3128\nhttp_port 8080\n":         "squid: squid.conf line 2: http_port: meshlab's squid listens on one http_port",
		"http_port 3128 ssl-bump\n":                "squid: squid.conf line 1: http_port: takes one [address:]port",
		"acl p port 80\nacl p method GET\n":        "squid: squid.conf line 2: acl: p method: the acl is already of type port",
		"acl p port 90-80\n":                       `squid: squid.conf line 1: acl: p port: "90-80" is not a port or a range of ports`,
		"http_port :x\n":                           `squid: squid.conf line 1: http_port: ":x" is not a port`,
		"acl s src 10.0.0.300\nhttp_access deny s": `squid: squid.conf line 1: acl: s src: "10.0.0.300" is not an address or a CIDR`,
	} {
		if _, err := parseSquidConf("squid.conf", conf); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", conf, err, want)
		}
	}
}

// A CONNECT is tunnelled to its target and logged in squid's native format; a CONNECT
// the rules deny is 403 and logged TCP_DENIED.
func TestSquidTunnel(t *testing.T) {
	t.Parallel()
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<title>site</title>")
	}))
	defer site.Close()
	c, err := parseSquidConf("squid.conf", "acl SSL_ports port "+site.URL[strings.LastIndex(site.URL, ":")+1:]+"\nacl CONNECT method CONNECT\nhttp_access deny CONNECT !SSL_ports\nhttp_access allow all\n")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	proxy := httptest.NewServer(newSquidProxy(c, lockedWriter{&mu, &log}))
	defer proxy.Close()

	client := site.Client()
	tr := client.Transport.(*http.Transport).Clone()
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	tr.Proxy = http.ProxyURL(proxyURL)
	client = &http.Client{Transport: tr}
	resp, err := client.Get(site.URL + "/wiki/Main_Page")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if string(body) != "<title>site</title>" {
		t.Errorf("through the tunnel: %q", body)
	}
	host := strings.TrimPrefix(site.URL, "https://")
	line := regexp.MustCompile(`^\d+\.\d{3} +\d+ 127\.0\.0\.1 TCP_TUNNEL/200 \d+ CONNECT ` + regexp.QuoteMeta(host) + ` - HIER_DIRECT/127\.0\.0\.1 -\n$`)
	waitLog := func(re *regexp.Regexp) {
		t.Helper()
		for range 100 {
			mu.Lock()
			got := log.String()
			mu.Unlock()
			if re.MatchString(got) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Errorf("access.log:\n%s\nwant a line matching %s", log.String(), re)
	}
	waitLog(line)

	// A CONNECT to port 22 is denied by "deny CONNECT !SSL_ports".
	conn, err := net.Dial("tcp", strings.TrimPrefix(proxy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "CONNECT example.org:22 HTTP/1.1\r\nHost: example.org:22\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT example.org:22: %d, want 403", r.StatusCode)
	}
	waitLog(regexp.MustCompile(`(?m)^\d+\.\d{3} +\d+ 127\.0\.0\.1 TCP_DENIED/403 0 CONNECT example\.org:22 - HIER_NONE/- text/html$`))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func FuzzParseSquidConf(f *testing.F) {
	f.Add(taskSquidConf)
	f.Add(squidDefaultConf)
	f.Add("acl p port 1-65535\nhttp_access allow !p all\n")
	f.Fuzz(func(t *testing.T, conf string) {
		c, err := parseSquidConf("squid.conf", conf)
		if err != nil {
			return
		}
		if c.port == 0 {
			t.Fatal("a parsed configuration listens on no port")
		}
		_ = c.allowed(squidRequest{method: "CONNECT", port: 443, src: netip.MustParseAddr("10.0.0.1"), path: "/"})
	})
}
