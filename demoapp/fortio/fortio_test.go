package fortio

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"fortio.org/fortio/fhttp" // fortio's own, in this test only: the reference we must match
	"fortio.org/fortio/periodic"
	flog "fortio.org/log"
)

// echoServers starts our EchoHandler and fortio's fhttp.EchoHandler on loopback.
func echoServers(t *testing.T) (ours, theirs string) {
	t.Helper()
	a := httptest.NewServer(http.HandlerFunc(EchoHandler))
	b := httptest.NewServer(http.HandlerFunc(fhttp.EchoHandler))
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	return a.URL, b.URL
}

type echoAnswer struct {
	status  int
	headers map[string]string
	body    []byte
	took    time.Duration
}

func askEcho(t *testing.T, method, url, contentType, body string) echoAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	start := time.Now()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	a := echoAnswer{status: resp.StatusCode, body: b, took: time.Since(start), headers: map[string]string{}}
	for _, k := range []string{"Content-Type", "Content-Length", "Connection", "X-Test"} {
		a.headers[k] = resp.Header.Get(k)
	}
	if resp.Close {
		a.headers["Connection"] = "close"
	}
	return a
}

// TestEchoMatchesFortio asks our echo and fortio's the same questions (the query
// arguments fortio's echo documents) and wants the same status, headers and body (the
// same body length for size=, whose bytes are each server's own pseudo-random payload).
func TestEchoMatchesFortio(t *testing.T) {
	ours, theirs := echoServers(t)
	cases := []struct {
		name, method, query, contentType, body string
		sameBody                               bool
		minTook                                time.Duration
	}{
		{name: "plain GET", method: "GET", query: "/", sameBody: true},
		{name: "POST echoes body and type", method: "POST", query: "/any/path", contentType: "application/json", body: `{"a":1}`, sameBody: true},
		{name: "status", method: "GET", query: "/?status=503", sameBody: true},
		{name: "status table at 100%", method: "GET", query: "/?status=418:100", sameBody: true},
		{name: "bad status", method: "GET", query: "/?status=abc", sameBody: true},
		{name: "status percentages over 100", method: "GET", query: "/?status=503:60,429:60", sameBody: true},
		{name: "size", method: "GET", query: "/?size=1000"},
		{name: "size capped", method: "GET", query: "/?size=9999999"},
		{name: "negative size", method: "GET", query: "/?size=-5", sameBody: true},
		{name: "size with POST body", method: "POST", query: "/?size=10", body: "ignored"},
		{name: "header", method: "GET", query: "/?header=X-Test:hello", sameBody: true},
		{name: "close", method: "GET", query: "/?close=true", sameBody: true},
		{name: "delay", method: "GET", query: "/?delay=150ms", sameBody: true, minTook: 150 * time.Millisecond},
		{name: "delay table at 100%", method: "GET", query: "/?delay=100ms:100", sameBody: true, minTook: 100 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := askEcho(t, tc.method, ours+tc.query, tc.contentType, tc.body)
			want := askEcho(t, tc.method, theirs+tc.query, tc.contentType, tc.body)
			if got.status != want.status {
				t.Errorf("%s %s: status %d, fortio's echo %d", tc.method, tc.query, got.status, want.status)
			}
			for k, v := range want.headers {
				if got.headers[k] != v {
					t.Errorf("%s %s: header %s %q, fortio's echo %q", tc.method, tc.query, k, got.headers[k], v)
				}
			}
			if len(got.body) != len(want.body) || (tc.sameBody && !bytes.Equal(got.body, want.body)) {
				t.Errorf("%s %s: body %d bytes %.40q, fortio's echo %d bytes %.40q", tc.method, tc.query, len(got.body), got.body, len(want.body), want.body)
			}
			if got.took < tc.minTook {
				t.Errorf("%s %s: answered in %v, want the %v delay", tc.method, tc.query, got.took, tc.minTook)
			}
		})
	}
}

// TestEchoStatusTable: status=503:50 answers both 503 and 200 (fortio's table with a
// remainder that defaults to 200), about half each.
func TestEchoStatusTable(t *testing.T) {
	ours, _ := echoServers(t)
	counts := map[int]int{}
	for range 200 {
		counts[askEcho(t, "GET", ours+"/?status=503:50", "", "").status]++
	}
	if len(counts) != 2 || counts[503] < 60 || counts[200] < 60 {
		t.Errorf("200 requests with status=503:50: %v, want about 100 each of 503 and 200", counts)
	}
}

var numberRE = regexp.MustCompile(`[-+]?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?`)

// reportTail is the part of a load report after fortio's periodic runner's own output
// (the part fhttp, and our runLoad, print), and the same with every number a '#'.
func reportTail(t *testing.T, report string) (lines, shapes []string) {
	t.Helper()
	_, tail, ok := strings.Cut(report, "# Socket and IP used for each connection:\n")
	if !ok {
		t.Fatalf("report has no \"# Socket and IP used\" section:\n%s", report)
	}
	for l := range strings.SplitSeq(strings.TrimSpace(tail), "\n") {
		lines = append(lines, l)
		shapes = append(shapes, numberRE.ReplaceAllString(l, "#"))
	}
	return lines, shapes
}

// TestLoadReportMatchesFortio runs our load and fortio's fhttp.RunHTTPTest with the same
// options (as `-c 2 -qps 0 -n 20 -loglevel Warning`) against the same server: the report
// lines after the runner's are the same lines (numbers aside), and the deterministic ones
// (codes, sockets, addresses, header and total sizes) are equal to the byte.
func TestLoadReportMatchesFortio(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(fhttp.EchoHandler))
	t.Cleanup(srv.Close)
	prev := flog.GetLogLevel()
	flog.SetLogLevelQuiet(flog.Warning)
	flog.SetOutput(io.Discard)
	t.Cleanup(func() { flog.SetLogLevelQuiet(prev) })
	for _, query := range []string{"/?size=300", "/?status=503"} {
		url := srv.URL + query
		var ours, theirs bytes.Buffer
		ro := periodic.RunnerOptions{QPS: -1, NumThreads: 2, Exactly: 20, Out: &ours}
		copts, err := newClientOptions(url, defaultTimeout, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runLoad(copts, &ro); err != nil {
			t.Fatalf("runLoad %s: %v", url, err)
		}
		fo := fhttp.HTTPRunnerOptions{
			RunnerOptions: periodic.RunnerOptions{QPS: -1, NumThreads: 2, Exactly: 20, Out: &theirs},
			HTTPOptions:   fhttp.HTTPOptions{URL: url},
		}
		if _, err := fhttp.RunHTTPTest(&fo); err != nil {
			t.Fatalf("fhttp.RunHTTPTest %s: %v", url, err)
		}
		gotLines, gotShapes := reportTail(t, ours.String())
		wantLines, wantShapes := reportTail(t, theirs.String())
		if strings.Join(gotShapes, "\n") != strings.Join(wantShapes, "\n") {
			t.Errorf("%s: report lines differ from fortio's\nours:\n%s\nfortio's:\n%s", query, ours.String(), theirs.String())
			continue
		}
		for i, w := range wantLines {
			deterministic := strings.HasPrefix(w, "Code ") || strings.HasPrefix(w, "Sockets used") ||
				strings.HasPrefix(w, "Response ") || strings.HasPrefix(w, "127.0.0.1:")
			if deterministic && gotLines[i] != w {
				t.Errorf("%s: line %q, fortio's %q", query, gotLines[i], w)
			}
		}
	}
}

// runMain runs Main and returns its exit code, stdout and stderr.
func runMain(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestLoadCommand is the circuit-breaking task's command line against our echo with
// status=503:30: fortio's header line, the runner's percentiles, Code 200 and Code 503
// lines adding up to -n, one socket per connection (keep-alive) and "All done".
func TestLoadCommand(t *testing.T) {
	ours, _ := echoServers(t)
	code, _, report := runMain("load", "-c", "3", "-qps", "0", "-n", "60", "-loglevel", "Warning", ours+"/?status=503:30")
	if code != 0 {
		t.Fatalf("fortio load: exit %d\n%s", code, report)
	}
	for _, want := range []string{
		"running at 0 queries per second", ", for 60 calls: " + ours,
		"Starting at max qps with 3 thread(s)", "# target 50% ", "# target 99.9% ",
		"(for perfect keepalive, would be 3)", "All done 60 calls (plus 0 warmup)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	codes := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^Code (...) : (\d+) \(`).FindAllStringSubmatch(report, -1) {
		n, _ := strconv.Atoi(m[2])
		codes[strings.TrimSpace(m[1])] = n
	}
	if codes["200"]+codes["503"] != 60 || codes["200"] == 0 || codes["503"] == 0 || len(codes) != 2 {
		t.Errorf("codes %v; want 60 calls split between 200 and 503\n%s", codes, report)
	}
	// fortio keeps each connection alive until a code that is not OK, then opens another
	m := regexp.MustCompile(`Sockets used: (\d+) `).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report has no \"Sockets used\" line:\n%s", report)
	}
	sockets, _ := strconv.Atoi(m[1])
	if sockets < 3 || sockets > 3+codes["503"] {
		t.Errorf("Sockets used: %d; want between 3 (one per connection) and 3 + the %d 503s\n%s", sockets, codes["503"], report)
	}
}

// TestLoadDurationWarmup: without -n the run has a warm-up request per connection (as
// fortio), counted in "All done"; a warm-up answered 500 aborts the run, as fortio does.
func TestLoadDurationWarmup(t *testing.T) {
	ours, _ := echoServers(t)
	code, _, report := runMain("load", "-c", "2", "-qps", "50", "-t", "300ms", "-loglevel", "Error", ours+"/")
	if code != 0 || !strings.Contains(report, "(plus 2 warmup)") || !strings.Contains(report, "for 300ms: "+ours) {
		t.Errorf("fortio load -t 300ms: exit %d, want 0, \"for 300ms\" and \"(plus 2 warmup)\"\n%s", code, report)
	}
	code, _, report = runMain("load", "-c", "2", "-qps", "50", "-t", "300ms", "-loglevel", "Error", ours+"/?status=500")
	if code != 1 || !strings.Contains(report, "Aborting because of error 500 for "+ours) {
		t.Errorf("fortio load against status=500: exit %d, want 1 and \"Aborting because of error 500\"\n%s", code, report)
	}
}

// TestLoadConnectionRefused: calls to a closed port are fortio's code -1.
func TestLoadConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, _, report := runMain("load", "-c", "1", "-qps", "0", "-n", "4", "-loglevel", "Critical", "http://"+addr+"/")
	if code != 0 || !strings.Contains(report, "Code  -1 : 4 (100.0 %)") {
		t.Errorf("fortio load to closed %s: exit %d, want 0 and \"Code  -1 : 4 (100.0 %%)\"\n%s", addr, code, report)
	}
}

// TestCurlCommand: `fortio curl` writes the status line and headers to stderr and the
// body to stdout; a status other than 200 exits 1.
func TestCurlCommand(t *testing.T) {
	ours, _ := echoServers(t)
	code, out, errs := runMain("curl", "-H", "Host: example.test", ours+"/?size=10&header=X-Test:yes")
	if code != 0 || len(out) != 10 || !strings.Contains(errs, "HTTP/1.1 200 OK\r\n") ||
		!strings.Contains(errs, "Content-Length: 10\r\n") || !strings.Contains(errs, "X-Test: yes\r\n") {
		t.Errorf("fortio curl: exit %d, stdout %d bytes, stderr:\n%s\nwant 0, 10 body bytes, the 200 status line and headers on stderr", code, len(out), errs)
	}
	code, _, errs = runMain("curl", "-quiet", ours+"/?status=404")
	if code != 1 || !strings.Contains(errs, "Error status 404") {
		t.Errorf("fortio curl status=404: exit %d, want 1 and \"Error status 404\"\nstderr:\n%s", code, errs)
	}
}

// TestMainRefusesBadInput: each bad command line exits 1 naming what is wrong.
func TestMainRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"server"}, `command "server" is not one`},
		{[]string{"load"}, "needs a URL"},
		{[]string{"load", "-H", "NoColon", "http://127.0.0.1:1/"}, `-H "NoColon"`},
		{[]string{"load", "-p", "50,abc", "http://127.0.0.1:1/"}, `-p "50,abc"`},
		{[]string{"curl", "-loglevel", "Loud", "http://127.0.0.1:1/"}, `-loglevel "Loud"`},
		{[]string{"curl", "-timeout", "0s", "http://127.0.0.1:1/"}, "-timeout 0s"},
	} {
		code, _, errs := runMain(tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("fortio %q: exit %d, stderr %q; want 1 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestBinaryDoesNotLinkFortioCLI guards the point of this package: the meshlab binary
// does not link fortio's fhttp and what it pulls in (fortio.org/cli, scli, dflag and
// x509roots/fallback, whose initialisation every process of the binary would pay for).
func TestBinaryDoesNotLinkFortioCLI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the binary's packages")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/meshlab/meshlab/cmd/meshlab").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/meshlab: %v", err)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		for _, banned := range []string{"golang.org/x/crypto/x509roots", "fortio.org/fortio/fhttp", "fortio.org/cli", "fortio.org/scli", "fortio.org/dflag", "fortio.org/fortio/fnet"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("cmd/meshlab links %s", dep)
			}
		}
	}
}
