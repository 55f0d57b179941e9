package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Options configure the admin handler.
type Options struct {
	State State // required
	// Config is the process's configuration, dumped as "config" (optional).
	Config any
	// Build is the dump's "version" (optional).
	Build Build
	// Level is the process's log level, read and set by /logging (optional).
	Level *slog.LevelVar
	// Shutdown is called by POST /quitquitquit (optional); it must not block for long.
	Shutdown func()
	// Ready reports whether the ztunnel is ready, for /healthz/ready (optional: always).
	Ready func() bool
}

// Handler serves ztunnel's admin endpoints: /config_dump, /logging, /quitquitquit,
// /healthz/ready, and / (the list of endpoints).
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/config_dump", func(w http.ResponseWriter, _ *http.Request) {
		body, err := ConfigDump(o.State, o.Config, o.Build)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/logging", func(w http.ResponseWriter, r *http.Request) { logging(w, r, o.Level) })
	mux.HandleFunc("/quitquitquit", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if o.Shutdown != nil {
			o.Shutdown()
		}
		plain(w, http.StatusOK, "shutdown now\n")
	})
	mux.HandleFunc("/healthz/ready", ReadyHandler(o.Ready).ServeHTTP)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "config_dump: dump the current Ztunnel configuration\n"+
			"logging: query/changing logging levels\nquitquitquit: shut down the server\n")
	})
	return mux
}

// ReadyHandler is ztunnel's readiness probe (15021 /healthz/ready): 200 once ready, 503
// before. A nil ready is always ready.
func ReadyHandler(ready func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			plain(w, http.StatusServiceUnavailable, "not ready\n")
			return
		}
		plain(w, http.StatusOK, "ready\n")
	})
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

const loggingHelp = `
usage: POST /logging						(To list current level)
usage: POST /logging?level=<level>				(To change global levels)
usage: POST /logging?level={mod1}:{level1},{mod2}:{level2}	(To change specific mods' logging level)

hint: loglevel:	error|warn|info|debug|trace|off
hint: mod_name:	the module name, i.e. ztunnel::proxy
`

// levels are ztunnel's level names on slog's scale.
var levels = map[string]slog.Level{
	"trace": slog.LevelDebug - 4,
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
	"off":   slog.LevelError + 100,
}

func levelName(l slog.Level) string {
	best := "info"
	for name, v := range levels {
		if v == l {
			return name
		}
	}
	return best
}

// logging is ztunnel's /logging: POST lists the level, POST ?level=x sets it (?reset
// puts it back to info). Scoped clauses (mod=level) are accepted and, with one process-wide
// level in meshlab's ztunnel, leave the global level alone.
func logging(w http.ResponseWriter, r *http.Request, lv *slog.LevelVar) {
	if r.Method != http.MethodPost {
		plain(w, http.StatusMethodNotAllowed, "Invalid HTTP method\n "+loggingHelp)
		return
	}
	if lv == nil {
		lv = &slog.LevelVar{}
	}
	q := r.URL.Query()
	level := q.Get("level")
	_, reset := q["reset"]
	if level != "" {
		global, ok := slog.Level(0), false
		for _, clause := range strings.Split(level, ",") {
			if l, known := levels[clause]; known {
				global, ok = l, true
				continue
			}
			if _, lvl, found := strings.Cut(clause, "="); found {
				if _, known := levels[lvl]; known {
					continue
				}
			}
			plain(w, http.StatusBadRequest, fmt.Sprintf("Invalid level provided: %s\n%s", level, loggingHelp))
			return
		}
		if reset {
			lv.Set(slog.LevelInfo)
		}
		if ok {
			lv.Set(global)
		}
	} else if reset {
		lv.Set(slog.LevelInfo)
	}
	plain(w, http.StatusOK, "current log level is "+levelName(lv.Level())+"\n")
}
