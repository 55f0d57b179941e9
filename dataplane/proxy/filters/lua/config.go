// Package lua is Envoy's envoy.filters.http.lua: a Lua script whose envoy_on_request and
// envoy_on_response functions see each request and response through a stream handle.
//
// Envoy runs the script in LuaJIT (Lua 5.1); the proxy runs it in gopher-lua, a Lua 5.1
// VM in Go. As Envoy: the script is loaded into one Lua state per worker, where its
// globals live (the proxy keeps a pool of states, one taken per phase, so two requests
// at once never share one); each phase of each request runs in a fresh coroutine of
// that state; a script error is logged ("script log: ..." at error) and counted
// (lua.errors) and the request goes on as if the script were not there; the handle
// and the objects it returns are dead once their phase ends ("object used outside of
// proper scope"); respond() ends the request phase with a local reply.
//
// The handle implements the part of Envoy's API its documentation's examples and
// istio.io's pages use: headers() (get, getAtIndex, getNumValues, add, replace, remove,
// pairs), respond, logTrace/logDebug/logInfo/logWarn/logErr/logCritical,
// streamInfo() (protocol, dynamicMetadata() get/set/pairs, the downstream addresses,
// requestedServerName), base64Escape. Every other method of Envoy's handle fails the
// script, by name, as Envoy's own script error would: the request goes on without it.
package lua

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// ConfigType is the filter's typed_config type.
const ConfigType = "envoy.extensions.filters.http.lua.v3.Lua"

// FilterName is the filter's well-known name, and the dynamic metadata namespace
// scripts conventionally write under.
const FilterName = "envoy.filters.http.lua"

// chunkName is the script's name in Lua's error messages, as LuaJIT names a chunk loaded
// from a string.
const chunkName = "[string \"...\"]"

// maxIdleStates bounds the pool of idle Lua states (Envoy keeps one per worker).
const maxIdleStates = 8

// allow lists what the proxy implements of the filter's config: the script inline,
// as inline_code or default_source_code's inline_string (what istiod sends for a
// TrafficExtension), and the stat prefix. source_codes (scripts chosen per route by
// LuaPerRoute) and a script read from a file are refused.
var allow = fieldcheck.Allow{
	ConfigType:                        {"inline_code", "default_source_code", "stat_prefix"},
	"envoy.config.core.v3.DataSource": {"inline_string"},
}

// Config is one compiled Lua filter. It is safe for concurrent use.
type Config struct {
	// StatPrefix is the filter's stat_prefix: its stats are
	// http.<hcm prefix>.lua.[<stat_prefix>.]errors and executions.
	StatPrefix string
	proto      *glua.FunctionProto
	// onRequest and onResponse report whether the script defines the function.
	onRequest, onResponse bool

	mu   sync.Mutex
	idle []*glua.LState
}

// Compile validates and compiles the filter's typed_config: the script must parse, and
// loading it (running its top level) must not fail, as Envoy refuses such a config.
func Compile(a *anypb.Any) (*Config, error) {
	var l luav3.Lua
	if err := a.UnmarshalTo(&l); err != nil {
		return nil, fmt.Errorf("typed_config: unpack %s: %w", ConfigType, err)
	}
	if err := l.ValidateAll(); err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if err := allow.Check(&l); err != nil {
		return nil, fmt.Errorf("typed_config.%w", err)
	}
	code := l.GetInlineCode() //nolint:staticcheck // deprecated in Envoy, still honoured there
	if l.GetDefaultSourceCode() != nil {
		if code != "" {
			return nil, errors.New("typed_config: only one of inline_code and default_source_code can be set for the Lua filter")
		}
		code = l.GetDefaultSourceCode().GetInlineString()
	}
	c, err := CompileScript(code)
	if err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	c.StatPrefix = l.GetStatPrefix()
	return c, nil
}

// CompileScript compiles a script and loads it once to check it.
func CompileScript(code string) (*Config, error) {
	chunk, err := parse.Parse(strings.NewReader(code), chunkName)
	if err != nil {
		return nil, fmt.Errorf("lua script: %w", err)
	}
	proto, err := glua.Compile(chunk, chunkName)
	if err != nil {
		return nil, fmt.Errorf("lua script: %w", err)
	}
	c := &Config{proto: proto}
	L, err := c.newState()
	if err != nil {
		return nil, err
	}
	_, c.onRequest = L.GetGlobal("envoy_on_request").(*glua.LFunction)
	_, c.onResponse = L.GetGlobal("envoy_on_response").(*glua.LFunction)
	c.put(L)
	return c, nil
}

// HasRequest and HasResponse report whether the script defines envoy_on_request and
// envoy_on_response (Envoy skips a phase without one).
func (c *Config) HasRequest() bool  { return c.onRequest }
func (c *Config) HasResponse() bool { return c.onResponse }

// stateOptions size a state and each coroutine made from it (gopher-lua gives a
// coroutine its own stacks, of its state's sizes): stacks that start small and grow
// as a script needs, up to gopher-lua's defaults, so a phase's fresh coroutine costs a
// few KB rather than gopher-lua's default ~200 KB.
var stateOptions = glua.Options{
	SkipOpenLibs:        true,
	CallStackSize:       glua.CallStackSize,
	MinimizeStackMemory: true,
	RegistrySize:        256,
	RegistryMaxSize:     glua.RegistrySize * 20,
	RegistryGrowStep:    glua.RegistryGrowStep,
}

// newState is a Lua state with the standard libraries LuaJIT opens (gopher-lua's own
// channel library left out) and the script loaded.
func (c *Config) newState() (*glua.LState, error) {
	L := glua.NewState(stateOptions)
	for _, lib := range []struct {
		name string
		open glua.LGFunction
	}{
		{glua.LoadLibName, glua.OpenPackage},
		{glua.BaseLibName, glua.OpenBase},
		{glua.TabLibName, glua.OpenTable},
		{glua.IoLibName, glua.OpenIo},
		{glua.OsLibName, glua.OpenOs},
		{glua.StringLibName, glua.OpenString},
		{glua.MathLibName, glua.OpenMath},
		{glua.DebugLibName, glua.OpenDebug},
		{glua.CoroutineLibName, glua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(glua.LString(lib.name))
		L.Call(1, 0)
	}
	registerTypes(L)
	L.Push(L.NewFunctionFromProto(c.proto))
	if err := L.PCall(0, glua.MultRet, nil); err != nil {
		L.Close()
		return nil, fmt.Errorf("lua script load: %s", errorText(err))
	}
	return L, nil
}

// get takes an idle state, or makes one.
func (c *Config) get() (*glua.LState, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		L := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return L, nil
	}
	c.mu.Unlock()
	return c.newState()
}

// put returns a state to the pool (closing it when the pool is full).
func (c *Config) put(L *glua.LState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) >= maxIdleStates {
		L.Close()
		return
	}
	c.idle = append(c.idle, L)
}

// errorText is a Lua error's message without gopher-lua's stack traceback, as Envoy logs
// the error LuaJIT raised.
func errorText(err error) string {
	var api *glua.ApiError
	if errors.As(err, &api) {
		if api.Object != nil && api.Object != glua.LNil {
			return api.Object.String()
		}
		if api.Cause != nil {
			return api.Cause.Error()
		}
	}
	return err.Error()
}
