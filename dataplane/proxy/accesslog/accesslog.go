// Package accesslog is the proxy's envoy.access_loggers.file and
// envoy.access_loggers.open_telemetry: it compiles AccessLog configs (FileAccessLog with
// a text or JSON SubstitutionFormatString, or Envoy's default format; an
// OpenTelemetryAccessLogConfig, otel.go) and writes one line per HTTP request or TCP
// connection, with Envoy's command operators and response flags, to a file or as an
// OTLP log record to a cluster.
package accesslog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	otelv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// FileLoggerName is the file access logger's Envoy name.
const FileLoggerName = "envoy.access_loggers.file"

var allow = fieldcheck.Allow{
	"envoy.config.accesslog.v3.AccessLog":          {"name", "typed_config", "filter"},
	"envoy.config.accesslog.v3.AccessLogFilter":    {"response_flag_filter", "status_code_filter"},
	"envoy.config.accesslog.v3.ResponseFlagFilter": {"flags"},
	"envoy.config.accesslog.v3.StatusCodeFilter":   {"comparison"},
	"envoy.config.accesslog.v3.ComparisonFilter":   {"op", "value"},
	// runtime_key: the proxy's runtime has no keys, so every key reads its default, as
	// Envoy's does for a key no layer sets (Istio's is istio.io/unset).
	"envoy.config.core.v3.RuntimeUInt32":                    {"default_value", "runtime_key"},
	"envoy.extensions.access_loggers.file.v3.FileAccessLog": {"path", "format", "json_format", "log_format"},
	"envoy.config.core.v3.SubstitutionFormatString":         {"text_format", "json_format", "text_format_source", "omit_empty_values", "content_type"},
	"envoy.config.core.v3.DataSource":                       {"inline_string", "inline_bytes"},
	// otel.go: Envoy's OpenTelemetry access logger as istiod configures it.
	"envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig": {"common_config", "body", "attributes", "resource_attributes", "disable_builtin_labels"},
	"envoy.extensions.access_loggers.grpc.v3.CommonGrpcAccessLogConfig":              {"log_name", "grpc_service", "transport_api_version", "filter_state_objects_to_log"},
	"envoy.config.core.v3.GrpcService":                                               {"envoy_grpc"},
	"envoy.config.core.v3.GrpcService.EnvoyGrpc":                                     {"cluster_name", "authority"},
}

// Logger writes access log entries to one file. Safe for concurrent use.
type Logger struct {
	path string
	text format
	json *jsonFormat
	out  atomic.Pointer[file] // the opened file, resolved on the first entry
	// filter is the response_flag_filter: an entry is written only when it carries one
	// of these flags (any flag when filterAny). Unfiltered when both are zero.
	filter    Flags
	filterAny bool
	// status is the status_code_filter, nil without it.
	status *statusFilter
	// otel is the OpenTelemetry logger (otel.go) an entry goes to instead of the file;
	// nil for a file logger.
	otel *otelLogger
}

// statusFilter is status_code_filter: the entry is written when its response code (0
// without a response) compares to the value by the operator.
type statusFilter struct {
	op    accesslogv3.ComparisonFilter_Op
	value uint32
}

func (f *statusFilter) match(code int) bool {
	c := uint32(max(code, 0))
	switch f.op {
	case accesslogv3.ComparisonFilter_GE:
		return c >= f.value
	case accesslogv3.ComparisonFilter_LE:
		return c <= f.value
	default:
		return c == f.value
	}
}

// Compile validates access_log entries and compiles them.
func Compile(logs []*accesslogv3.AccessLog) ([]*Logger, error) {
	var out []*Logger
	for i, l := range logs {
		lg, err := compileOne(l)
		if err != nil {
			return nil, fmt.Errorf("access_log[%d].%w", i, err)
		}
		out = append(out, lg)
	}
	return out, nil
}

func compileOne(l *accesslogv3.AccessLog) (*Logger, error) {
	if err := allow.Check(l); err != nil {
		return nil, err
	}
	tc := l.GetTypedConfig()
	var f filev3.FileAccessLog
	var oc otelv3.OpenTelemetryAccessLogConfig
	lg := &Logger{}
	switch {
	case tc != nil && tc.MessageName() == oc.ProtoReflect().Descriptor().FullName():
		if err := tc.UnmarshalTo(&oc); err != nil {
			return nil, fmt.Errorf("typed_config: %w", err)
		}
		if err := oc.ValidateAll(); err != nil {
			return nil, fmt.Errorf("typed_config: %w", err)
		}
		ol, err := compileOTel(&oc)
		if err != nil {
			return nil, err
		}
		lg.otel = ol
	case tc == nil || tc.MessageName() != f.ProtoReflect().Descriptor().FullName():
		return nil, fmt.Errorf("typed_config: unsupported access logger %s", l.GetName())
	default:
		if err := tc.UnmarshalTo(&f); err != nil {
			return nil, fmt.Errorf("typed_config: %w", err)
		}
		if err := f.ValidateAll(); err != nil {
			return nil, fmt.Errorf("typed_config: %w", err)
		}
		if err := allow.Check(&f); err != nil {
			return nil, fmt.Errorf("typed_config.%w", err)
		}
		lg.path = f.GetPath()
	}
	if l.GetFilter() != nil && l.GetFilter().GetResponseFlagFilter() == nil && l.GetFilter().GetStatusCodeFilter() == nil {
		return nil, errors.New("filter: a response_flag_filter or status_code_filter is required (the filters meshlab proxy implements)")
	}
	if sf := l.GetFilter().GetStatusCodeFilter(); sf != nil {
		lg.status = &statusFilter{op: sf.GetComparison().GetOp(), value: sf.GetComparison().GetValue().GetDefaultValue()}
	}
	if rf := l.GetFilter().GetResponseFlagFilter(); rf != nil {
		if len(rf.GetFlags()) == 0 {
			lg.filterAny = true
		}
		for j, name := range rf.GetFlags() {
			fl, ok := ParseFlag(name)
			if !ok {
				return nil, fmt.Errorf("filter.response_flag_filter.flags[%d]: unknown response flag %q", j, name)
			}
			lg.filter |= fl
		}
	}
	if lg.otel != nil {
		return lg, nil
	}
	var err error
	switch {
	case f.GetLogFormat() != nil:
		sf := f.GetLogFormat()
		switch {
		case sf.GetJsonFormat() != nil:
			lg.json, err = compileJSON(sf.GetJsonFormat(), sf.GetOmitEmptyValues())
		case sf.GetTextFormatSource() != nil:
			src := sf.GetTextFormatSource()
			s := src.GetInlineString()
			if b := src.GetInlineBytes(); b != nil {
				s = string(b)
			}
			lg.text, err = parseFormat(s)
		case sf.GetTextFormat() != "": //nolint:staticcheck // Envoy still honours this deprecated field, so the stand-in must too
			lg.text, err = parseFormat(sf.GetTextFormat()) //nolint:staticcheck // as above
		default:
			err = errors.New("log_format: no format set")
		}
	case f.GetJsonFormat() != nil: //nolint:staticcheck // Envoy still honours this deprecated field, so the stand-in must too
		lg.json, err = compileJSON(f.GetJsonFormat(), false) //nolint:staticcheck // as above
	case f.GetFormat() != "": //nolint:staticcheck // Envoy still honours this deprecated field, so the stand-in must too
		lg.text, err = parseFormat(f.GetFormat()) //nolint:staticcheck // as above
	default:
		lg.text, err = parseFormat(DefaultFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("typed_config.log_format: %w", err)
	}
	return lg, nil
}

// Render returns the entry's line (newline included for JSON; text formats carry their
// own).
func (l *Logger) Render(i *Info) string {
	if l.otel != nil {
		return l.otel.body.render(i)
	}
	if l.json != nil {
		return l.json.render(i)
	}
	return l.text.render(i)
}

// Log writes one entry; write errors are dropped as Envoy drops them.
func (l *Logger) Log(i *Info) {
	if l.status != nil && !l.status.match(i.Code) {
		return
	}
	if (l.filterAny && i.Flags == 0) || (l.filter != 0 && i.Flags&l.filter == 0) {
		return
	}
	if l.otel != nil {
		l.otel.log(i)
		return
	}
	w := l.out.Load()
	if w == nil {
		var err error
		if w, err = open(l.path); err != nil {
			return
		}
		l.out.Store(w)
	}
	w.write(l.Render(i))
}

// LogAll writes i to every logger.
func LogAll(ls []*Logger, i *Info) {
	for _, l := range ls {
		l.Log(i)
	}
}

type file struct {
	mu sync.Mutex
	f  *os.File
}

func (f *file) write(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = f.f.WriteString(s)
}

var (
	filesMu sync.Mutex
	files   = map[string]*file{}
)

// open returns the shared append-mode writer of path; files stay open for the life of
// the process, as Envoy's access log manager keeps them (reopened only on SIGUSR1).
func open(path string) (*file, error) {
	filesMu.Lock()
	defer filesMu.Unlock()
	if f, ok := files[path]; ok {
		return f, nil
	}
	var fh *os.File
	switch path {
	case "/dev/stdout":
		fh = os.Stdout
	case "/dev/stderr":
		fh = os.Stderr
	default:
		var err error
		fh, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open access log %s: %w", path, err)
		}
	}
	f := &file{f: fh}
	files[path] = f
	return f, nil
}
