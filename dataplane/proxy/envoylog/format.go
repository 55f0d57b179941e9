package envoylog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Format is a compiled application log format: an spdlog pattern (Envoy's --log-format
// and application_log_config.log_format.text_format) or a JSON object whose values are
// patterns (log_format.json_format). Immutable.
type Format struct {
	text []piece
	json []jsonField // set for a JSON format, sorted by key
}

type jsonField struct {
	key string
	val []piece
}

type piece struct {
	lit  string
	flag byte // 0 for a literal
}

// Entry is what one log line is made of.
type Entry struct {
	Time    time.Time
	Level   slog.Level
	Logger  string // the component ("main", "upstream", ...)
	Message string // the message with its attributes
	PID     int
}

// knownFlags are the spdlog flags rendered; others are refused so that a format is never
// printed wrong silently. Source location flags (%g %s %# %!) render empty: the proxy's
// records carry no source location, as spdlog renders them without one.
const knownFlags = "YmdHMSTeFflLnvjt_Pgs#!%"

// ParseTextFormat compiles an spdlog pattern.
func ParseTextFormat(pattern string) (*Format, error) {
	p, err := parsePattern(pattern)
	if err != nil {
		return nil, err
	}
	return &Format{text: p}, nil
}

// ParseJSONFormat compiles a json_format: each string value is an spdlog pattern.
func ParseJSONFormat(fields map[string]any) (*Format, error) {
	f := &Format{}
	for k, v := range fields {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("json_format.%s: only string values are supported", k)
		}
		p, err := parsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("json_format.%s: %w", k, err)
		}
		f.json = append(f.json, jsonField{key: k, val: p})
	}
	sort.Slice(f.json, func(i, j int) bool { return f.json[i].key < f.json[j].key })
	return f, nil
}

func parsePattern(s string) ([]piece, error) {
	var out []piece
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return nil, fmt.Errorf("pattern %q ends with %%", s)
		}
		i++
		c := s[i]
		if c == '%' {
			lit.WriteByte('%')
			continue
		}
		if !strings.ContainsRune(knownFlags, rune(c)) {
			return nil, fmt.Errorf("pattern %q: flag %%%c is not supported by meshlab proxy", s, c)
		}
		if lit.Len() > 0 {
			out = append(out, piece{lit: lit.String()})
			lit.Reset()
		}
		out = append(out, piece{flag: c})
	}
	if lit.Len() > 0 {
		out = append(out, piece{lit: lit.String()})
	}
	return out, nil
}

var shortLevels = map[string]string{"trace": "T", "debug": "D", "info": "I", "warning": "W", "error": "E", "critical": "C", "off": "O"}

func render(b *strings.Builder, ps []piece, e *Entry, inJSON bool) {
	t := e.Time.UTC()
	for _, p := range ps {
		if p.flag == 0 {
			b.WriteString(p.lit)
			continue
		}
		switch p.flag {
		case 'Y':
			fmt.Fprintf(b, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(b, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(b, "%02d", t.Second())
		case 'T':
			fmt.Fprintf(b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'e':
			fmt.Fprintf(b, "%03d", t.Nanosecond()/1e6)
		case 'f':
			fmt.Fprintf(b, "%06d", t.Nanosecond()/1e3)
		case 'F':
			fmt.Fprintf(b, "%09d", t.Nanosecond())
		case 'l':
			b.WriteString(LevelName(e.Level))
		case 'L':
			b.WriteString(shortLevels[LevelName(e.Level)])
		case 'n':
			b.WriteString(e.Logger)
		case 'v', '_':
			// %_ is Envoy's message with newlines escaped.
			msg := e.Message
			if p.flag == '_' {
				msg = strings.ReplaceAll(msg, "\n", "\\n")
			}
			if inJSON {
				writeJSONEscaped(b, msg)
			} else {
				b.WriteString(msg)
			}
		case 'j':
			// %j is Envoy's JSON-escaped message, for json_format values and text formats
			// that embed JSON.
			writeJSONEscaped(b, e.Message)
		case 't', 'P':
			// Envoy prints the thread id for %t; the proxy's goroutines have none, so
			// its process id stands in, as the default line format already does.
			b.WriteString(strconv.Itoa(e.PID))
		case 'g', 's', '#', '!':
			// No source location is recorded.
		}
	}
}

func writeJSONEscaped(b *strings.Builder, s string) {
	q, _ := json.Marshal(s)
	b.Write(q[1 : len(q)-1])
}

// Render returns the line for e, newline included.
func (f *Format) Render(e *Entry) string {
	var b strings.Builder
	if f.json == nil {
		render(&b, f.text, e, false)
		b.WriteByte('\n')
		return b.String()
	}
	b.WriteByte('{')
	for i, fl := range f.json {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONKey(&b, fl.key)
		b.WriteString(":\"")
		render(&b, fl.val, e, true)
		b.WriteByte('"')
	}
	b.WriteString("}\n")
	return b.String()
}

func writeJSONKey(b *strings.Builder, k string) {
	q, _ := json.Marshal(k)
	b.Write(q)
}
