package lua

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
	"google.golang.org/protobuf/types/known/structpb"
)

// Message is the headers one phase sees and changes: the request's or the response's.
type Message struct {
	// Header is the message's regular headers (the script's names are matched case
	// insensitively and written canonical; the proxy writes them in lower case).
	Header http.Header
	// Pseudo holds its pseudo-headers: ":method", ":path", ":authority" and ":scheme"
	// of a request, ":status" of a response. The caller reads them back after the phase.
	Pseudo map[string]string
}

// Stream is what one request's phases share with the script.
type Stream struct {
	// Protocol is the downstream protocol, as streamInfo():protocol() gives it
	// ("HTTP/1.1", "HTTP/2").
	Protocol string
	// The downstream connection's addresses (ip:port) and TLS SNI.
	DownstreamLocal, DownstreamRemote, DownstreamDirectRemote, RequestedServerName string
	// Meta is the request's dynamic metadata by filter namespace; dynamicMetadata():set
	// makes it when nil.
	Meta map[string]*structpb.Struct
	// Log writes a line the script logs, at its level; nil drops them.
	Log func(level slog.Level, msg string)
}

// Reply is the local reply respond() asks for.
type Reply struct {
	Status int
	Header http.Header
	Body   string
}

// Phase is a phase's outcome.
type Phase struct {
	// Reply is non-nil when the script responded (request phase only).
	Reply *Reply
	// Err is the script error that ended the phase; it was logged ("script log: ...").
	Err error
	// Ran reports whether the script's function for the phase ran at all.
	Ran bool
}

// OnRequest runs envoy_on_request on the request m, in a fresh coroutine.
func (c *Config) OnRequest(s *Stream, m *Message) Phase {
	if !c.onRequest {
		return Phase{}
	}
	return c.run("envoy_on_request", s, m, true)
}

// OnResponse runs envoy_on_response on the response m, in a fresh coroutine.
func (c *Config) OnResponse(s *Stream, m *Message) Phase {
	if !c.onResponse {
		return Phase{}
	}
	return c.run("envoy_on_response", s, m, false)
}

// errUnexpectedYield is Envoy's error for a script that yields itself.
var errUnexpectedYield = errors.New("script performed an unexpected yield")

func (c *Config) run(function string, s *Stream, m *Message, request bool) Phase {
	L, err := c.get()
	if err != nil {
		s.log(slog.LevelError, err.Error())
		return Phase{Err: err, Ran: true}
	}
	defer c.put(L)
	co, cancel := L.NewThread()
	if cancel != nil {
		defer cancel()
	}
	h := &handle{stream: s, msg: m, request: request}
	fn, _ := L.GetGlobal(function).(*glua.LFunction)
	st, err, _ := L.Resume(co, fn, h.userData(L, typeStream))
	h.dead = true
	switch {
	case err != nil:
		err = errors.New(errorText(err))
	case st == glua.ResumeYield && h.reply == nil:
		err = errUnexpectedYield
	}
	if err != nil {
		s.log(slog.LevelError, err.Error())
		return Phase{Err: err, Ran: true}
	}
	return Phase{Reply: h.reply, Ran: true}
}

func (s *Stream) log(level slog.Level, msg string) {
	if s.Log != nil {
		s.Log(level, "script log: "+msg)
	}
}

// handle is one phase's stream handle; every object it hands out shares its life.
type handle struct {
	stream  *Stream
	msg     *Message
	request bool
	reply   *Reply
	dead    bool
}

// object is what a userdata holds: the handle and, for a dynamic metadata map or a
// header map, nothing more (they reach their data through the handle).
type object struct {
	h    *handle
	kind string
}

// The userdata types, named as Envoy's wrappers.
const (
	typeStream     = "StreamHandleWrapper"
	typeHeaders    = "HeaderMapWrapper"
	typeStreamInfo = "StreamInfoWrapper"
	typeDynMeta    = "DynamicMetadataMapWrapper"
)

func (h *handle) userData(L *glua.LState, kind string) *glua.LUserData {
	ud := L.NewUserData()
	ud.Value = &object{h: h, kind: kind}
	L.SetMetatable(ud, L.GetTypeMetatable(kind))
	return ud
}

// self returns the live object of the method's receiver, raising Envoy's errors for a
// wrong receiver or a dead one.
func self(L *glua.LState, kind string) *object {
	ud := L.CheckUserData(1)
	o, ok := ud.Value.(*object)
	if !ok || o.kind != kind {
		L.ArgError(1, kind+" expected")
		return nil
	}
	if o.h.dead {
		L.RaiseError("object used outside of proper scope")
	}
	return o
}

// unimplemented are the methods of Envoy's wrappers the proxy does not implement, by
// type: calling one fails the script by name.
var unimplemented = map[string][]string{
	typeStream: {
		"body", "bodyChunks", "trailers", "metadata", "httpCall", "connection",
		"connectionStreamInfo", "importPublicKey", "verifySignature", "timestamp",
		"timestampString", "setUpstreamOverrideHost", "clearRouteCache", "filterContext",
		"virtualHost", "route", "stats",
	},
	typeHeaders:    {"setHttp1ReasonPhrase"},
	typeStreamInfo: {"downstreamSslConnection", "filterState", "route", "virtualHost", "routeName", "dynamicTypedMetadata"},
}

// registerTypes makes the wrappers' metatables in L, and gives pairs() the __pairs
// metamethod LuaJIT's 5.2 compatibility honours (Envoy's headers and metadata are
// iterated with it).
func registerTypes(L *glua.LState) {
	methods := map[string]map[string]glua.LGFunction{
		typeStream: {
			"headers":      streamHeaders,
			"respond":      streamRespond,
			"streamInfo":   streamInfo,
			"base64Escape": streamBase64Escape,
			"logTrace":     streamLog(slog.LevelDebug - 4),
			"logDebug":     streamLog(slog.LevelDebug),
			"logInfo":      streamLog(slog.LevelInfo),
			"logWarn":      streamLog(slog.LevelWarn),
			"logErr":       streamLog(slog.LevelError),
			"logCritical":  streamLog(slog.LevelError + 4),
		},
		typeHeaders: {
			"get": headersGet, "getAtIndex": headersGetAtIndex, "getNumValues": headersGetNumValues,
			"add": headersSetter(http.Header.Add), "replace": headersSetter(http.Header.Set), "remove": headersRemove,
		},
		typeStreamInfo: {
			"protocol":                      infoString(func(s *Stream) string { return s.Protocol }),
			"downstreamLocalAddress":        infoString(func(s *Stream) string { return s.DownstreamLocal }),
			"downstreamRemoteAddress":       infoString(func(s *Stream) string { return s.DownstreamRemote }),
			"downstreamDirectRemoteAddress": infoString(func(s *Stream) string { return s.DownstreamDirectRemote }),
			"requestedServerName":           infoString(func(s *Stream) string { return s.RequestedServerName }),
			"dynamicMetadata":               infoDynamicMetadata,
		},
		typeDynMeta: {"get": metaGet, "set": metaSet},
	}
	for kind, ms := range methods {
		mt := L.NewTypeMetatable(kind)
		index := L.SetFuncs(L.NewTable(), ms)
		for _, name := range unimplemented[kind] {
			index.RawSetString(name, L.NewFunction(refuse(kind, name)))
		}
		L.SetField(mt, "__index", index)
	}
	L.SetField(L.GetTypeMetatable(typeHeaders), "__pairs", L.NewFunction(headersPairs))
	L.SetField(L.GetTypeMetatable(typeDynMeta), "__pairs", L.NewFunction(metaPairs))
	base := L.GetGlobal("pairs")
	L.SetGlobal("pairs", L.NewFunction(func(L *glua.LState) int {
		v := L.CheckAny(1)
		f := L.GetMetaField(v, "__pairs")
		if f == glua.LNil {
			f = base
		}
		L.Push(f)
		L.Push(v)
		L.Call(1, 3)
		return 3
	}))
}

func refuse(kind, name string) glua.LGFunction {
	return func(L *glua.LState) int {
		L.RaiseError("%s:%s() is not implemented by meshlab's proxy (its Lua filter implements headers(), respond(), streamInfo() with dynamicMetadata(), base64Escape() and the log functions); do it in the app, or with a route or policy the mesh implements", kind, name)
		return 0
	}
}

func streamHeaders(L *glua.LState) int {
	o := self(L, typeStream)
	L.Push(o.h.userData(L, typeHeaders))
	return 1
}

func streamInfo(L *glua.LState) int {
	o := self(L, typeStream)
	L.Push(o.h.userData(L, typeStreamInfo))
	return 1
}

func streamLog(level slog.Level) glua.LGFunction {
	return func(L *glua.LState) int {
		o := self(L, typeStream)
		o.h.stream.log(level, L.CheckString(2))
		return 0
	}
}

func streamBase64Escape(L *glua.LState) int {
	self(L, typeStream)
	L.Push(glua.LString(base64.StdEncoding.EncodeToString([]byte(L.CheckString(2)))))
	return 1
}

// streamRespond is respond(headers, body): the request phase ends with a local reply;
// Envoy does not support it in the response phase.
func streamRespond(L *glua.LState) int {
	o := self(L, typeStream)
	if !o.h.request {
		L.RaiseError("respond not currently supported in the response path")
		return 0
	}
	tb := L.CheckTable(2)
	body := L.OptString(3, "")
	r := &Reply{Header: http.Header{}, Body: body}
	var bad string
	tb.ForEach(func(k, v glua.LValue) {
		name := strings.ToLower(k.String())
		add := func(val glua.LValue) {
			if name == ":status" {
				r.Status, _ = strconv.Atoi(val.String())
				return
			}
			if strings.HasPrefix(name, ":") {
				bad = name
				return
			}
			r.Header.Add(name, val.String())
		}
		if t, ok := v.(*glua.LTable); ok {
			t.ForEach(func(_, val glua.LValue) { add(val) })
			return
		}
		add(v)
	})
	if bad != "" {
		L.RaiseError("invalid pseudo-header %q in respond()", bad)
		return 0
	}
	if r.Status < 200 || r.Status > 999 {
		// Envoy's Utility::getResponseStatus on a missing or bad :status.
		L.RaiseError(":status must be specified and a valid unsigned long")
		return 0
	}
	o.h.reply = r
	return L.Yield()
}

// headerName is the name a script gives, as the map keeps it.
func headerName(L *glua.LState, n int) string {
	return strings.ToLower(L.CheckString(n))
}

func (m *Message) values(name string) []string {
	if strings.HasPrefix(name, ":") {
		if v, ok := m.Pseudo[name]; ok {
			return []string{v}
		}
		return nil
	}
	return m.Header.Values(name)
}

func headersGet(L *glua.LState) int {
	o := self(L, typeHeaders)
	vs := o.h.msg.values(headerName(L, 2))
	if len(vs) == 0 {
		L.Push(glua.LNil)
		return 1
	}
	// Envoy joins the values of a repeated header with ",".
	L.Push(glua.LString(strings.Join(vs, ",")))
	return 1
}

func headersGetAtIndex(L *glua.LState) int {
	o := self(L, typeHeaders)
	vs := o.h.msg.values(headerName(L, 2))
	i := L.CheckInt(3)
	if i < 0 || i >= len(vs) {
		L.Push(glua.LNil)
		return 1
	}
	L.Push(glua.LString(vs[i]))
	return 1
}

func headersGetNumValues(L *glua.LState) int {
	o := self(L, typeHeaders)
	L.Push(glua.LNumber(len(o.h.msg.values(headerName(L, 2)))))
	return 1
}

// headersSetter is add(name, value) (one more value of name, set Header.Add) and
// replace(name, value) (name's only value, set Header.Set); a pseudo-header has one value.
func headersSetter(set func(h http.Header, name, value string)) glua.LGFunction {
	return func(L *glua.LState) int {
		o := self(L, typeHeaders)
		name, value := headerName(L, 2), L.CheckString(3)
		if strings.HasPrefix(name, ":") {
			o.h.msg.Pseudo[name] = value
			return 0
		}
		set(o.h.msg.Header, name, value)
		return 0
	}
}

func headersRemove(L *glua.LState) int {
	o := self(L, typeHeaders)
	name := headerName(L, 2)
	if strings.HasPrefix(name, ":") {
		delete(o.h.msg.Pseudo, name)
		return 0
	}
	o.h.msg.Header.Del(name)
	return 0
}

// headersPairs iterates the pseudo-headers, then the headers in name order, one entry
// per value, names in lower case, as Envoy's iterator.
func headersPairs(L *glua.LState) int {
	o := self(L, typeHeaders)
	var kv [][2]string
	for _, p := range []string{":method", ":path", ":authority", ":scheme", ":status"} {
		if v, ok := o.h.msg.Pseudo[p]; ok {
			kv = append(kv, [2]string{p, v})
		}
	}
	names := make([]string, 0, len(o.h.msg.Header))
	for k := range o.h.msg.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range o.h.msg.Header[k] {
			kv = append(kv, [2]string{strings.ToLower(k), v})
		}
	}
	return iterate(L, o.h, kv)
}

// iterate pushes pairs' generic-for triplet over kv.
func iterate(L *glua.LState, h *handle, kv [][2]string) int {
	i := 0
	L.Push(L.NewFunction(func(L *glua.LState) int {
		if h.dead {
			L.RaiseError("object used outside of proper scope")
		}
		if i >= len(kv) {
			L.Push(glua.LNil)
			return 1
		}
		L.Push(glua.LString(kv[i][0]))
		L.Push(glua.LString(kv[i][1]))
		i++
		return 2
	}))
	L.Push(glua.LNil)
	L.Push(glua.LNil)
	return 3
}

func infoString(get func(*Stream) string) glua.LGFunction {
	return func(L *glua.LState) int {
		o := self(L, typeStreamInfo)
		L.Push(glua.LString(get(o.h.stream)))
		return 1
	}
}

func infoDynamicMetadata(L *glua.LState) int {
	o := self(L, typeStreamInfo)
	L.Push(o.h.userData(L, typeDynMeta))
	return 1
}

// metaGet is get(filter): the filter namespace's metadata as a table, nil when unset.
func metaGet(L *glua.LState) int {
	o := self(L, typeDynMeta)
	st := o.h.stream.Meta[L.CheckString(2)]
	if st == nil {
		L.Push(glua.LNil)
		return 1
	}
	L.Push(fromStruct(L, st))
	return 1
}

// metaSet is set(filter, key, value): value (a string, number, boolean or table) under
// key in the filter's namespace.
func metaSet(L *glua.LState) int {
	o := self(L, typeDynMeta)
	filter, key := L.CheckString(2), L.CheckString(3)
	v, err := toValue(L.CheckAny(4), 0)
	if err != nil {
		L.ArgError(4, err.Error())
		return 0
	}
	s := o.h.stream
	if s.Meta == nil {
		s.Meta = map[string]*structpb.Struct{}
	}
	st := s.Meta[filter]
	if st == nil {
		st = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		s.Meta[filter] = st
	}
	if st.Fields == nil {
		st.Fields = map[string]*structpb.Value{}
	}
	st.Fields[key] = v
	return 0
}

// metaPairs iterates the filter namespaces, each with its metadata as a table.
func metaPairs(L *glua.LState) int {
	o := self(L, typeDynMeta)
	names := make([]string, 0, len(o.h.stream.Meta))
	for k := range o.h.stream.Meta {
		names = append(names, k)
	}
	sort.Strings(names)
	i := 0
	L.Push(L.NewFunction(func(L *glua.LState) int {
		if o.h.dead {
			L.RaiseError("object used outside of proper scope")
		}
		if i >= len(names) {
			L.Push(glua.LNil)
			return 1
		}
		n := names[i]
		i++
		L.Push(glua.LString(n))
		L.Push(fromStruct(L, o.h.stream.Meta[n]))
		return 2
	}))
	L.Push(glua.LNil)
	L.Push(glua.LNil)
	return 3
}

// maxDepth bounds a table's nesting when it is stored as metadata (a cycle otherwise
// recurses forever).
const maxDepth = 32

// toValue converts a Lua value to a protobuf Value, as Envoy's metadata setter: a
// table with keys 1..n is a list, any other a struct with string keys.
func toValue(v glua.LValue, depth int) (*structpb.Value, error) {
	if depth > maxDepth {
		return nil, errors.New("table nested too deep")
	}
	switch v := v.(type) {
	case glua.LString:
		return structpb.NewStringValue(string(v)), nil
	case glua.LNumber:
		return structpb.NewNumberValue(float64(v)), nil
	case glua.LBool:
		return structpb.NewBoolValue(bool(v)), nil
	case *glua.LTable:
		if n := v.Len(); n > 0 {
			list := &structpb.ListValue{}
			for i := 1; i <= n; i++ {
				e, err := toValue(v.RawGetInt(i), depth+1)
				if err != nil {
					return nil, err
				}
				list.Values = append(list.Values, e)
			}
			return structpb.NewListValue(list), nil
		}
		st := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		var err error
		v.ForEach(func(k, e glua.LValue) {
			if err != nil {
				return
			}
			ks, ok := k.(glua.LString)
			if !ok {
				err = errors.New("table keys must be strings")
				return
			}
			var ev *structpb.Value
			if ev, err = toValue(e, depth+1); err == nil {
				st.Fields[string(ks)] = ev
			}
		})
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(st), nil
	}
	return nil, errors.New("unexpected type '" + v.Type().String() + "' in dynamicMetadata")
}

func fromStruct(L *glua.LState, st *structpb.Struct) *glua.LTable {
	t := L.NewTable()
	for k, v := range st.GetFields() {
		t.RawSetString(k, fromValue(L, v))
	}
	return t
}

func fromValue(L *glua.LState, v *structpb.Value) glua.LValue {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return glua.LString(k.StringValue)
	case *structpb.Value_NumberValue:
		return glua.LNumber(k.NumberValue)
	case *structpb.Value_BoolValue:
		return glua.LBool(k.BoolValue)
	case *structpb.Value_StructValue:
		return fromStruct(L, k.StructValue)
	case *structpb.Value_ListValue:
		t := L.NewTable()
		for _, e := range k.ListValue.GetValues() {
			t.Append(fromValue(L, e))
		}
		return t
	}
	return glua.LNil
}
