package lua

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// parityScript is istio.io's extend-waypoint-lua page's script.
const parityScript = `function envoy_on_request(request_handle)
  local number = tonumber(request_handle:headers():get("x-number"))
  if number == nil then return end
  local parity = number % 2 == 0 and "even" or "odd"
  request_handle:streamInfo():dynamicMetadata():set(
    "envoy.filters.http.lua", "parity", parity)
end
function envoy_on_response(response_handle)
  local meta = response_handle:streamInfo():dynamicMetadata():get(
    "envoy.filters.http.lua")
  if meta == nil then return end
  response_handle:headers():add("x-parity", meta["parity"])
end
`

func compileInline(tb testing.TB, code string) *Config {
	tb.Helper()
	a, err := anypb.New(&luav3.Lua{DefaultSourceCode: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: code}}})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := Compile(a)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// logs collects a stream's script log lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) stream() *Stream {
	return &Stream{Protocol: "HTTP/1.1", Log: func(level slog.Level, msg string) {
		l.mu.Lock()
		l.lines = append(l.lines, level.String()+" "+msg)
		l.mu.Unlock()
	}}
}

func request(h ...string) *Message {
	m := &Message{Header: http.Header{}, Pseudo: map[string]string{":method": "GET", ":path": "/productpage", ":authority": "productpage:9080", ":scheme": "http"}}
	for i := 0; i+1 < len(h); i += 2 {
		m.Header.Add(h[i], h[i+1])
	}
	return m
}

func response() *Message {
	return &Message{Header: http.Header{}, Pseudo: map[string]string{":status": "200"}}
}

func TestParityScript(t *testing.T) {
	t.Parallel()
	c := compileInline(t, parityScript)
	for _, tc := range []struct {
		name, number, want string
	}{
		{name: "even", number: "4", want: "even"},
		{name: "odd", number: "7", want: "odd"},
		{name: "no number", number: "", want: ""},
		{name: "not a number", number: "seven", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var l logs
			s := l.stream()
			req := request()
			if tc.number != "" {
				req = request("X-Number", tc.number)
			}
			if p := c.OnRequest(s, req); p.Err != nil || p.Reply != nil || !p.Ran {
				t.Fatalf("envoy_on_request: %+v", p)
			}
			resp := response()
			if p := c.OnResponse(s, resp); p.Err != nil {
				t.Fatalf("envoy_on_response: %v", p.Err)
			}
			if got := resp.Header.Get("x-parity"); got != tc.want {
				t.Errorf("x-parity %q, want %q", got, tc.want)
			}
			if len(l.lines) != 0 {
				t.Errorf("log lines: %q", l.lines)
			}
		})
	}
}

func TestHandleAPI(t *testing.T) {
	t.Parallel()
	c := compileInline(t, `
function envoy_on_request(h)
  local hs = h:headers()
  hs:add("x-added", "a")
  hs:add("x-added", "b")
  hs:replace("x-replaced", "r")
  hs:remove("x-gone")
  h:logInfo("path " .. hs:get(":path") .. " n=" .. hs:getNumValues("x-added") .. " second=" .. hs:getAtIndex("x-added", 1))
  local seen = {}
  for k, v in pairs(hs) do seen[#seen + 1] = k .. "=" .. v end
  h:logDebug(table.concat(seen, ";"))
  hs:replace(":path", "/rewritten")
  h:streamInfo():dynamicMetadata():set("ns", "t", {a = 1, b = {"x", "y"}})
  local m = h:streamInfo():dynamicMetadata():get("ns")
  h:logWarn(h:streamInfo():protocol() .. " " .. m.t.b[2] .. " " .. h:base64Escape("hi"))
end
`)
	var l logs
	s := l.stream()
	req := request("X-Gone", "1", "X-Replaced", "old")
	if p := c.OnRequest(s, req); p.Err != nil {
		t.Fatal(p.Err)
	}
	if got := req.Header.Values("x-added"); strings.Join(got, ",") != "a,b" {
		t.Errorf("x-added %q", got)
	}
	if req.Header.Get("x-replaced") != "r" || req.Header.Get("x-gone") != "" || req.Pseudo[":path"] != "/rewritten" {
		t.Errorf("request after the script: %v %v", req.Header, req.Pseudo)
	}
	want := []string{
		"INFO script log: path /productpage n=2 second=b",
		"DEBUG script log: :method=GET;:path=/productpage;:authority=productpage:9080;:scheme=http;x-added=a;x-added=b;x-replaced=r",
		"WARN script log: HTTP/1.1 y aGk=",
	}
	if strings.Join(l.lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("logs:\n%s\nwant\n%s", strings.Join(l.lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestRespond(t *testing.T) {
	t.Parallel()
	c := compileInline(t, `
function envoy_on_request(h)
  if h:headers():get("x-deny") then
    h:respond({[":status"] = "403", ["x-why"] = "lua"}, "denied by lua")
    h:logErr("not reached: respond ends the phase")
  end
end
function envoy_on_response(h)
  h:respond({[":status"] = "500"}, "")
end
`)
	var l logs
	s := l.stream()
	p := c.OnRequest(s, request("X-Deny", "1"))
	if p.Err != nil || p.Reply == nil || p.Reply.Status != 403 || p.Reply.Body != "denied by lua" || p.Reply.Header.Get("x-why") != "lua" {
		t.Fatalf("respond: %+v %+v", p, p.Reply)
	}
	if p := c.OnResponse(s, response()); p.Err == nil || p.Err.Error() != chunkName+":9: respond not currently supported in the response path" {
		t.Errorf("respond in the response path: %v, want Envoy's error", p.Err)
	}
	if len(l.lines) != 1 || !strings.HasPrefix(l.lines[0], "ERROR script log: "+chunkName+":9: respond not currently supported") {
		t.Errorf("logs: %q", l.lines)
	}
}

func TestScriptErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, code, want string
	}{
		{name: "runtime error", code: `function envoy_on_request(h) error("boom") end`, want: "boom"},
		{name: "unimplemented method", code: `function envoy_on_request(h) h:body() end`, want: "StreamHandleWrapper:body() is not implemented by meshlab's proxy"},
		{name: "unknown method", code: `function envoy_on_request(h) h:noSuchMethod() end`, want: "attempt to call a non-function object"},
		{name: "yield", code: `function envoy_on_request(h) coroutine.yield() end`, want: "script performed an unexpected yield"},
		{name: "kept handle", code: `kept = nil
function envoy_on_request(h) if kept then kept:headers() end kept = h end`, want: "object used outside of proper scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := compileInline(t, tc.code)
			var l logs
			var p Phase
			for range 2 { // the kept handle fails on the second request (same state)
				p = c.OnRequest(l.stream(), request())
				if p.Err != nil {
					break
				}
			}
			if p.Err == nil || !strings.Contains(p.Err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", p.Err, tc.want)
			}
			if len(l.lines) != 1 || !strings.HasPrefix(l.lines[0], "ERROR script log: ") {
				t.Errorf("logs: %q", l.lines)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  *luav3.Lua
		want string
	}{
		{name: "syntax", cfg: &luav3.Lua{InlineCode: "function envoy_on_request("}, want: "lua script"},              //nolint:staticcheck // inline_code: deprecated, still taken by Envoy
		{name: "load error", cfg: &luav3.Lua{InlineCode: `error("at load")`}, want: "lua script load: " + chunkName}, //nolint:staticcheck // inline_code: deprecated, still taken by Envoy
		{name: "source_codes", cfg: &luav3.Lua{SourceCodes: map[string]*corev3.DataSource{"a": {Specifier: &corev3.DataSource_InlineString{InlineString: "x=1"}}}}, want: "source_codes"},
		{name: "filename", cfg: &luav3.Lua{DefaultSourceCode: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/x.lua"}}}, want: "filename"},
		{name: "both", cfg: &luav3.Lua{InlineCode: "x=1", DefaultSourceCode: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x=1"}}}, want: "only one of"}, //nolint:staticcheck // inline_code: deprecated, still taken by Envoy
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := anypb.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Compile(a); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestConcurrentRequests runs the page's script from many goroutines at once: each
// phase takes a state of its own (gopher-lua's states are not safe for concurrent use).
func TestConcurrentRequests(t *testing.T) {
	t.Parallel()
	c := compileInline(t, parityScript)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l logs
			s := l.stream()
			n := []string{"2", "3"}[i%2]
			c.OnRequest(s, request("X-Number", n))
			resp := response()
			c.OnResponse(s, resp)
			if want := map[string]string{"2": "even", "3": "odd"}[n]; resp.Header.Get("x-parity") != want {
				errs <- "x-parity " + resp.Header.Get("x-parity") + " for " + n
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
