package httpconn

import (
	"net/http"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// luaScript is istio.io's extend-waypoint-lua page's parity script, plus a respond on
// x-deny, a header for upstream and a call of a method the proxy does not implement.
const luaScript = `function envoy_on_request(request_handle)
  if request_handle:headers():get("x-deny") then
    request_handle:respond({[":status"] = "418", ["x-lua"] = "teapot"}, "no")
  end
  if request_handle:headers():get("x-body") then
    request_handle:body()
  end
  request_handle:headers():add("x-from-lua", "yes")
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

// TestLuaFilter runs the Lua filter in an HCM in front of an echo backend: the request
// phase adds a header the backend sees and writes dynamic metadata the response phase
// and the access log read; respond() answers locally (details lua_response); a script
// error (an unimplemented method) is counted and the request goes on, as Envoy's.
func TestLuaFilter(t *testing.T) {
	l := echoLab(t, func(h *hcmv3.HttpConnectionManager) {
		f := &luav3.Lua{DefaultSourceCode: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: luaScript}}}
		h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "extensions.istio.io/trafficextension/default.parity",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, f)}}}, h.HttpFilters...)
		var fl filev3.FileAccessLog
		if err := h.AccessLog[0].GetTypedConfig().UnmarshalTo(&fl); err != nil {
			t.Fatal(err)
		}
		fl.AccessLogFormat = &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
				InlineString: "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS% %DYNAMIC_METADATA(envoy.filters.http.lua:parity)%\n"}}}}}
		h.AccessLog[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &fl)}
	})
	resp, body := l.get(t, "/", "X-Number", "4")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Parity") != "even" {
		t.Errorf("x-number 4: %d x-parity %q, want 200 even", resp.StatusCode, resp.Header.Get("X-Parity"))
	}
	if got := seen(t, body); got["x-from-lua"] != "yes" {
		t.Errorf("the backend saw %v, want x-from-lua: yes", got)
	}
	resp, _ = l.get(t, "/", "X-Number", "7")
	if resp.Header.Get("X-Parity") != "odd" {
		t.Errorf("x-number 7: x-parity %q, want odd", resp.Header.Get("X-Parity"))
	}
	resp, _ = l.get(t, "/")
	if v, ok := resp.Header["X-Parity"]; ok {
		t.Errorf("no x-number: x-parity %q, want none", v)
	}
	resp, body = l.get(t, "/", "X-Deny", "1")
	if resp.StatusCode != 418 || body != "no" || resp.Header.Get("X-Lua") != "teapot" {
		t.Errorf("respond: %d %q %v, want 418 no with x-lua", resp.StatusCode, body, resp.Header)
	}
	resp, body = l.get(t, "/", "X-Body", "1", "X-Number", "3")
	if resp.StatusCode != http.StatusOK || seen(t, body)["x-from-lua"] != "" {
		t.Errorf("script error: %d, the backend saw %v; want the request through without the script's header", resp.StatusCode, seen(t, body))
	}
	if resp.Header.Get("X-Parity") != "" {
		t.Errorf("script error in the request phase: x-parity %q, want none (no metadata was set)", resp.Header.Get("X-Parity"))
	}
	lines := strings.Join(l.waitLines(t, 5), "\n")
	for _, want := range []string{"200 via_upstream even", "200 via_upstream odd", "418 lua_response -"} {
		if !strings.Contains(lines, want) {
			t.Errorf("access log:\n%s\nwant a line %q", lines, want)
		}
	}
	if n := l.store.Value("http.lab.lua.errors"); n != 1 {
		t.Errorf("http.lab.lua.errors = %d, want 1", n)
	}
	if n := l.store.Value("http.lab.lua.executions"); n < 9 {
		t.Errorf("http.lab.lua.executions = %d, want a request and a response phase per request", n)
	}
}
