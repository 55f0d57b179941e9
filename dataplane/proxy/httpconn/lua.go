package httpconn

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/lua"
)

// luaLoggerName is Envoy's lua logger, which a script's log lines and errors go to.
const luaLoggerName = "lua"

// applyLua runs one envoy.filters.http.lua's envoy_on_request: the script reads and
// changes the request's headers (a changed :path, :authority or :method goes upstream;
// the route was chosen before, as Envoy's when the script does not clear the route
// cache), writes dynamic metadata (shared with the access log and the response phase),
// or responds, which ends the request with its local reply (response code details
// lua_response). A script error is logged and counted, and the request goes on. It
// reports whether the request was answered.
func (rt *router) applyLua(x *exchange, c *lua.Config) (int, bool) {
	if !c.HasRequest() {
		x.lua = append(x.lua, c)
		return 0, false
	}
	r := x.r
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := requestPath(r)
	m := &lua.Message{Header: r.Header, Pseudo: map[string]string{":method": r.Method, ":path": path, ":authority": r.Host, ":scheme": scheme}}
	s := rt.luaStream(x)
	p := c.OnRequest(s, m)
	rt.luaCount(c, p)
	rt.keepLuaMeta(x, s)
	if v := m.Pseudo[":method"]; v != "" {
		r.Method = v
	}
	if v := m.Pseudo[":authority"]; v != "" {
		r.Host = v
	}
	if v := m.Pseudo[":path"]; v != "" && v != path {
		r.RequestURI = v
	}
	if p.Reply != nil {
		h := x.w.Header()
		for k, vs := range p.Reply.Header {
			h[k] = append(h[k], vs...)
		}
		x.info.CodeDetails = "lua_response"
		return rt.localReply(x, p.Reply.Status, p.Reply.Body), true
	}
	x.lua = append(x.lua, c)
	return 0, false
}

// luaResponse runs envoy_on_response of the Lua filters the request went through, last
// first, as Envoy's encoder filters run, on response headers h with status code; it
// returns the code the scripts leave in :status.
func (rt *router) luaResponse(x *exchange, code int, h http.Header) int {
	if len(x.lua) == 0 {
		return code
	}
	s := rt.luaStream(x)
	for i := len(x.lua) - 1; i >= 0; i-- {
		c := x.lua[i]
		if !c.HasResponse() {
			continue
		}
		m := &lua.Message{Header: h, Pseudo: map[string]string{":status": strconv.Itoa(code)}}
		p := c.OnResponse(s, m)
		rt.luaCount(c, p)
		if n, err := strconv.Atoi(m.Pseudo[":status"]); err == nil && n >= 100 && n <= 999 {
			code = n
		}
	}
	rt.keepLuaMeta(x, s)
	return code
}

// luaStream is what the request's Lua phases see of it.
func (rt *router) luaStream(x *exchange) *lua.Stream {
	s := &lua.Stream{
		Protocol:               x.r.Proto,
		DownstreamLocal:        rt.ds.Local.String(),
		DownstreamDirectRemote: rt.ds.Remote.String(),
		DownstreamRemote:       rt.ds.Remote.String(),
		RequestedServerName:    rt.ds.ServerName,
		Meta:                   x.meta,
	}
	if x.r.ProtoMajor == 2 {
		s.Protocol = "HTTP/2"
	}
	if x.remote.IsValid() {
		s.DownstreamRemote = x.remote.String()
	}
	if rt.deps.Logger != nil {
		log := rt.deps.Logger.With("component", luaLoggerName)
		s.Log = func(level slog.Level, msg string) { log.Log(x.r.Context(), level, msg) }
	}
	return s
}

// keepLuaMeta keeps the dynamic metadata the scripts wrote (the access log reads it).
func (rt *router) keepLuaMeta(x *exchange, s *lua.Stream) {
	if s.Meta != nil {
		x.meta = s.Meta
		x.info.DynamicMetadata = x.meta
	}
}

// luaCount counts a phase that ran in http.<prefix>.lua.[<stat_prefix>.]executions,
// and its error in errors, as Envoy's filter.
func (rt *router) luaCount(c *lua.Config, p lua.Phase) {
	if !p.Ran {
		return
	}
	prefix := "lua."
	if c.StatPrefix != "" {
		prefix += c.StatPrefix + "."
	}
	rt.st.scope.Counter(prefix + "executions").Inc()
	if p.Err != nil {
		rt.st.scope.Counter(prefix + "errors").Inc()
	}
}
