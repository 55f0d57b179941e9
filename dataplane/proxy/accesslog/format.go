package accesslog

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// DefaultFormat is Envoy's default access log format.
const DefaultFormat = `[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"` + "\n"

// Info is what one access log entry describes: an HTTP request or a TCP connection.
type Info struct {
	Start           time.Time
	Duration        time.Duration
	Protocol        string // "HTTP/1.1"; empty for TCP
	Method          string
	Path            string
	Authority       string
	Scheme          string
	ReqHeader       http.Header
	RespHeader      http.Header
	Code            int // 0 when no response was sent (TCP)
	CodeDetails     string
	Flags           Flags
	BytesReceived   int64
	BytesSent       int64
	UpstreamHost    string
	UpstreamCluster string
	UpstreamLocal   string
	DownstreamLocal netip.AddrPort
	DownstreamPeer  netip.AddrPort // the connection's peer (%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%)
	// DownstreamRemote is the HTTP client address when the HCM takes it from
	// x-forwarded-for (use_remote_address false), %DOWNSTREAM_REMOTE_ADDRESS%; invalid:
	// the peer.
	DownstreamRemote netip.AddrPort
	RouteName        string
	// Set by the listener or transport socket when known; empty renders "-".
	FilterChainName                string // %FILTER_CHAIN_NAME%
	RequestedServerName            string // %REQUESTED_SERVER_NAME%: the downstream TLS SNI
	UpstreamTransportFailureReason string // %UPSTREAM_TRANSPORT_FAILURE_REASON%
	ConnectionTerminationDetails   string // %CONNECTION_TERMINATION_DETAILS%
	// FilterState are the stream's (or connection's) filter state objects in their
	// string form, for %FILTER_STATE(key:PLAIN)%; DynamicMetadata its dynamic metadata by
	// filter namespace, for %DYNAMIC_METADATA(ns:key...)%.
	FilterState     map[string]string
	DynamicMetadata map[string]*structpb.Struct
	// PeerURISAN and LocalURISAN are the first URI SANs of the downstream TLS peer's and
	// of the local certificate (%DOWNSTREAM_PEER_URI_SAN%, %DOWNSTREAM_LOCAL_URI_SAN%).
	PeerURISAN, LocalURISAN string
}

// value is one rendered operator: a string, a number, or absent ("-" in text, null in JSON).
type value struct {
	s      string
	num    bool
	absent bool
}

type operator func(*Info) value

type segment struct {
	lit string
	op  operator
}

// format is a compiled Envoy format string.
type format []segment

func str(s string) value {
	if s == "" {
		return value{absent: true}
	}
	return value{s: s}
}

func num(n int64) value { return value{s: strconv.FormatInt(n, 10), num: true} }

func addr(a netip.AddrPort, withPort bool) value {
	if !a.IsValid() {
		return value{absent: true}
	}
	if withPort {
		return value{s: a.String()}
	}
	return value{s: a.Addr().String()}
}

var simpleOps = map[string]operator{
	"PROTOCOL": func(i *Info) value { return str(i.Protocol) },
	"RESPONSE_CODE": func(i *Info) value {
		return num(int64(i.Code)) // 0 when no response, as Envoy
	},
	"RESPONSE_CODE_DETAILS":          func(i *Info) value { return str(i.CodeDetails) },
	"CONNECTION_TERMINATION_DETAILS": func(i *Info) value { return str(i.ConnectionTerminationDetails) },
	"UPSTREAM_TRANSPORT_FAILURE_REASON": func(i *Info) value {
		// Envoy's formatter writes the reason with its spaces replaced by underscores.
		return str(strings.ReplaceAll(i.UpstreamTransportFailureReason, " ", "_"))
	},
	"RESPONSE_FLAGS":           func(i *Info) value { return value{s: i.Flags.String()} },
	"BYTES_RECEIVED":           func(i *Info) value { return num(i.BytesReceived) },
	"BYTES_SENT":               func(i *Info) value { return num(i.BytesSent) },
	"DURATION":                 func(i *Info) value { return num(i.Duration.Milliseconds()) },
	"UPSTREAM_HOST":            func(i *Info) value { return str(i.UpstreamHost) },
	"UPSTREAM_CLUSTER":         func(i *Info) value { return str(i.UpstreamCluster) },
	"UPSTREAM_CLUSTER_RAW":     func(i *Info) value { return str(i.UpstreamCluster) },
	"UPSTREAM_LOCAL_ADDRESS":   func(i *Info) value { return str(i.UpstreamLocal) },
	"DOWNSTREAM_LOCAL_ADDRESS": func(i *Info) value { return addr(i.DownstreamLocal, true) },
	"DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT": func(i *Info) value {
		return addr(i.DownstreamLocal, false)
	},
	"DOWNSTREAM_LOCAL_PORT": func(i *Info) value {
		if !i.DownstreamLocal.IsValid() {
			return value{absent: true}
		}
		return num(int64(i.DownstreamLocal.Port()))
	},
	"DOWNSTREAM_REMOTE_ADDRESS":              func(i *Info) value { return addr(i.remote(), true) },
	"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": func(i *Info) value { return addr(i.remote(), false) },
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS":       func(i *Info) value { return addr(i.DownstreamPeer, true) },
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT": func(i *Info) value {
		return addr(i.DownstreamPeer, false)
	},
	"REQUESTED_SERVER_NAME":    func(i *Info) value { return str(i.RequestedServerName) },
	"DOWNSTREAM_PEER_URI_SAN":  func(i *Info) value { return str(i.PeerURISAN) },
	"DOWNSTREAM_LOCAL_URI_SAN": func(i *Info) value { return str(i.LocalURISAN) },
	"FILTER_CHAIN_NAME":        func(i *Info) value { return str(i.FilterChainName) },
	"ROUTE_NAME":               func(i *Info) value { return str(i.RouteName) },
	"START_TIME": func(i *Info) value {
		return value{s: i.Start.UTC().Format("2006-01-02T15:04:05.000Z")}
	},
	"HOSTNAME": func(*Info) value {
		h, _ := os.Hostname()
		return str(h)
	},
}

// parseFormat compiles an Envoy format string; an unknown command operator is an error
// naming it, as Envoy refuses it.
func parseFormat(s string) (format, error) {
	var f format
	var lit strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "%%") {
			lit.WriteByte('%')
			i += 2
			continue
		}
		end := strings.IndexByte(s[i+1:], '%')
		if end < 0 {
			return nil, fmt.Errorf("incorrect configuration: %s. Couldn't find valid command at position %d", s, i)
		}
		cmd := s[i+1 : i+1+end]
		op, err := compileOperator(cmd)
		if err != nil {
			return nil, err
		}
		if lit.Len() > 0 {
			f = append(f, segment{lit: lit.String()})
			lit.Reset()
		}
		f = append(f, segment{op: op})
		i += end + 2
	}
	if lit.Len() > 0 {
		f = append(f, segment{lit: lit.String()})
	}
	return f, nil
}

func compileOperator(cmd string) (operator, error) {
	if op, ok := simpleOps[cmd]; ok {
		return op, nil
	}
	for _, kind := range []string{"REQ", "RESP"} {
		if !strings.HasPrefix(cmd, kind+"(") {
			continue
		}
		rest := cmd[len(kind)+1:]
		closeAt := strings.IndexByte(rest, ')')
		if closeAt < 0 {
			return nil, fmt.Errorf("invalid header configuration. Expected format %s(header):max_length, got %%%s%%", kind, cmd)
		}
		names := strings.SplitN(rest[:closeAt], "?", 2)
		maxLen := -1
		if tail := rest[closeAt+1:]; tail != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(tail, ":"))
			if !strings.HasPrefix(tail, ":") || err != nil || n < 0 {
				return nil, fmt.Errorf("length must be an integer, got %%%s%%", cmd)
			}
			maxLen = n
		}
		isReq := kind == "REQ"
		return func(i *Info) value {
			for _, n := range names {
				if v, ok := headerOf(i, isReq, n); ok {
					if maxLen >= 0 && len(v) > maxLen {
						v = v[:maxLen]
					}
					return value{s: v}
				}
			}
			return value{absent: true}
		}, nil
	}
	if strings.HasPrefix(cmd, "FILTER_STATE(") {
		return filterStateOperator(cmd)
	}
	if strings.HasPrefix(cmd, "DYNAMIC_METADATA(") {
		return dynamicMetadataOperator(cmd)
	}
	if cmd == "START_TIME" || strings.HasPrefix(cmd, "START_TIME(") {
		return nil, fmt.Errorf("%%%s%%: custom START_TIME formats are not supported by meshlab proxy", cmd)
	}
	return nil, fmt.Errorf("not supported field in StreamInfo: %s", cmd)
}

func headerOf(i *Info, req bool, name string) (string, bool) {
	name = strings.ToLower(name)
	if req {
		switch name {
		case ":method":
			return i.Method, i.Method != ""
		case ":path":
			return i.Path, i.Path != ""
		case ":authority", "host":
			return i.Authority, i.Authority != ""
		case ":scheme":
			return i.Scheme, i.Scheme != ""
		}
	}
	h := i.RespHeader
	if req {
		h = i.ReqHeader
	}
	if name == ":status" && !req && i.Code != 0 {
		return strconv.Itoa(i.Code), true
	}
	vs, ok := h[http.CanonicalHeaderKey(name)]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func (f format) render(i *Info) string {
	var b strings.Builder
	for _, s := range f {
		if s.op == nil {
			b.WriteString(s.lit)
			continue
		}
		v := s.op(i)
		if v.absent {
			b.WriteByte('-')
		} else {
			b.WriteString(v.s)
		}
	}
	return b.String()
}

// jsonFormat is a compiled json_format: each value is a format string; a value that is
// exactly one operator keeps its type (numbers stay numbers, absent is null).
type jsonFormat struct {
	keys   []string
	values []any // format or *jsonFormat
	omit   bool
}

func compileJSON(s *structpb.Struct, omitEmpty bool) (*jsonFormat, error) {
	j := &jsonFormat{omit: omitEmpty}
	keys := make([]string, 0, len(s.GetFields()))
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := s.GetFields()[k]
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			f, err := parseFormat(x.StringValue)
			if err != nil {
				return nil, err
			}
			j.keys, j.values = append(j.keys, k), append(j.values, f)
		case *structpb.Value_StructValue:
			sub, err := compileJSON(x.StructValue, omitEmpty)
			if err != nil {
				return nil, err
			}
			j.keys, j.values = append(j.keys, k), append(j.values, sub)
		default:
			return nil, errors.New("only string values and nested structs are supported in json_format")
		}
	}
	return j, nil
}

func (j *jsonFormat) object(i *Info) map[string]any {
	out := make(map[string]any, len(j.keys))
	for n, k := range j.keys {
		switch v := j.values[n].(type) {
		case *jsonFormat:
			out[k] = v.object(i)
		case format:
			if len(v) == 1 && v[0].op != nil {
				val := v[0].op(i)
				switch {
				case val.absent:
					if !j.omit {
						out[k] = nil
					}
				case val.num:
					n, _ := strconv.ParseInt(val.s, 10, 64)
					out[k] = n
				default:
					out[k] = val.s
				}
				continue
			}
			out[k] = v.render(i)
		}
	}
	return out
}

func (j *jsonFormat) render(i *Info) string {
	b, _ := json.Marshal(j.object(i))
	return string(b) + "\n"
}

// remote is %DOWNSTREAM_REMOTE_ADDRESS%: the x-forwarded-for client when the HCM
// trusted it, else the peer.
func (i *Info) remote() netip.AddrPort {
	if i.DownstreamRemote.IsValid() {
		return i.DownstreamRemote
	}
	return i.DownstreamPeer
}

// FormatString is a compiled Envoy format string outside an access log (a substitution
// format string such as tcp_proxy's tunneling_config.hostname).
type FormatString struct{ f format }

// CompileFormatString compiles s with the access log's command operators.
func CompileFormatString(s string) (*FormatString, error) {
	f, err := parseFormat(s)
	if err != nil {
		return nil, err
	}
	return &FormatString{f: f}, nil
}

// Render formats the string for i (an absent value renders as "-", as in a log line).
func (fs *FormatString) Render(i *Info) string { return fs.f.render(i) }

// filterStateOperator compiles %FILTER_STATE(KEY:PLAIN)%: the object's string form.
// Objects here are strings (set_filter_state's), so only the PLAIN serialization is
// implemented; Envoy's default TYPED one (the object's proto as JSON) is refused.
func filterStateOperator(cmd string) (operator, error) {
	inner, tail, ok := strings.Cut(strings.TrimPrefix(cmd, "FILTER_STATE("), ")")
	if !ok || tail != "" {
		return nil, fmt.Errorf("%%%s%%: expected FILTER_STATE(key:PLAIN)", cmd)
	}
	key, ser, _ := strings.Cut(inner, ":")
	if key == "" || ser != "PLAIN" {
		return nil, fmt.Errorf("%%%s%%: only FILTER_STATE(key:PLAIN) is supported by meshlab proxy", cmd)
	}
	return func(i *Info) value {
		v, ok := i.FilterState[key]
		if !ok {
			return value{absent: true}
		}
		return value{s: v}
	}, nil
}

// dynamicMetadataOperator compiles %DYNAMIC_METADATA(NAMESPACE:KEY:...)%: the value at
// the key path in the namespace's struct, a string as it is, anything else as JSON; the
// whole namespace without keys.
func dynamicMetadataOperator(cmd string) (operator, error) {
	inner, tail, ok := strings.Cut(strings.TrimPrefix(cmd, "DYNAMIC_METADATA("), ")")
	if !ok || (tail != "" && !strings.HasPrefix(tail, ":")) {
		return nil, fmt.Errorf("%%%s%%: expected DYNAMIC_METADATA(namespace:key...)", cmd)
	}
	if tail != "" {
		return nil, fmt.Errorf("%%%s%%: a length limit on DYNAMIC_METADATA is not supported by meshlab proxy", cmd)
	}
	parts := strings.Split(inner, ":")
	if parts[0] == "" {
		return nil, fmt.Errorf("%%%s%%: a filter namespace is required", cmd)
	}
	ns, path := parts[0], parts[1:]
	return func(i *Info) value {
		st := i.DynamicMetadata[ns]
		if st == nil {
			return value{absent: true}
		}
		v := structpb.NewStructValue(st)
		for _, k := range path {
			next, ok := v.GetStructValue().GetFields()[k]
			if !ok {
				return value{absent: true}
			}
			v = next
		}
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			return value{s: s.StringValue}
		}
		b, err := v.MarshalJSON()
		if err != nil {
			return value{absent: true}
		}
		return value{s: string(b)}
	}, nil
}

// RenderHeader formats the string as a header value: an absent value renders empty, as
// Envoy's header formatters do.
func (fs *FormatString) RenderHeader(i *Info) string {
	var b strings.Builder
	for _, s := range fs.f {
		if s.op == nil {
			b.WriteString(s.lit)
			continue
		}
		if v := s.op(i); !v.absent {
			b.WriteString(v.s)
		}
	}
	return b.String()
}
