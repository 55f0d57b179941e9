package lua

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// FuzzCompile feeds the filter's config arbitrary scripts and runs both phases of what
// compiles: nothing may panic, and a phase either succeeds or reports a logged error.
func FuzzCompile(f *testing.F) {
	f.Add(parityScript, "4")
	f.Add(`function envoy_on_request(h) h:respond({[":status"]="200"}, "x") end`, "")
	f.Add(`function envoy_on_request(h) for k, v in pairs(h:headers()) do h:logInfo(k..v) end end`, "1")
	f.Add(`function envoy_on_response(h) h:streamInfo():dynamicMetadata():set("a", "b", {1, {c = true}}) end`, "")
	f.Add("function envoy_on_request(", "")
	f.Fuzz(func(t *testing.T, code, number string) {
		a, err := anypb.New(&luav3.Lua{DefaultSourceCode: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: code}}})
		if err != nil {
			t.Skip()
		}
		if len(code) > 2000 || containsLoop(code) {
			t.Skip() // an endless script hangs Envoy's worker as it hangs this one
		}
		c, err := Compile(a)
		if err != nil {
			return
		}
		var l logs
		s := l.stream()
		p := c.OnRequest(s, request("X-Number", number))
		if p.Err != nil && len(l.lines) == 0 {
			t.Errorf("request phase error %v not logged", p.Err)
		}
		c.OnResponse(s, response())
	})
}

// containsLoop reports whether code may loop forever (while, repeat, for): the fuzzer
// is not to wait for the halting problem. Endless recursion ends in gopher-lua's stack
// limit, a script error.
func containsLoop(code string) bool {
	for _, kw := range []string{"while", "repeat", "for"} {
		if strings.Contains(code, kw) {
			return true
		}
	}
	return false
}
