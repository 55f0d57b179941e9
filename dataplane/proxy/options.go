package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshlab/meshlab/dataplane/proxy/envoylog"
)

// Mode is Envoy's --mode.
type Mode int

// Modes, as Envoy's CommandLineOptions.Mode.
const (
	ModeServe Mode = iota
	ModeValidate
	ModeInitOnly
)

// DrainStrategy is Envoy's --drain-strategy.
type DrainStrategy int

// Drain strategies.
const (
	DrainGradual DrainStrategy = iota
	DrainImmediate
)

// Options are the proxy's command line, Envoy's flags parsed and validated.
type Options struct {
	ConfigPath               string
	ConfigYAML               string
	AdminAddressPath         string
	RestartEpoch             uint32
	BaseID                   uint32
	BaseIDPath               string
	UseDynamicBaseID         bool
	DrainTime                time.Duration
	DrainStrategy            DrainStrategy
	ParentShutdownTime       time.Duration
	ServiceCluster           string
	ServiceNode              string
	ServiceZone              string
	LogLevel                 slog.Level
	LogLevelName             string
	ComponentLogLevel        string
	ComponentLevels          map[string]slog.Level
	LogPath                  string
	LogFormat                string
	Concurrency              uint32
	LocalAddressIPVersion    string
	Mode                     Mode
	HotRestartVersion        bool
	DisableHotRestart        bool
	Version                  bool
	AllowUnknownStaticFields bool
	// RequestTotalsFile is the file the proxy adds its requests to (dataplane/rqtotals):
	// the environment's rqtotals.Env, not a flag, so that the command line stays Envoy's.
	RequestTotalsFile string
}

// ParseError is a command line Envoy would refuse (exit status 1).
type ParseError struct {
	Msg  string
	Help bool // --help was asked for: print Msg to stdout and exit 0
}

// Error returns the message Envoy would print.
func (e *ParseError) Error() string { return e.Msg }

// ParseArgs parses Envoy's command line.
func ParseArgs(args []string) (Options, error) {
	fs := pflag.NewFlagSet("envoy", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	fs.SortFlags = false
	var o Options
	var drainS, parentS uint32
	var drainStrategy, mode, logLevel string
	fs.StringVarP(&o.ConfigPath, "config-path", "c", "", "Path to configuration file")
	fs.StringVar(&o.ConfigYAML, "config-yaml", "", "YAML string for a v3 bootstrap proto")
	fs.StringVar(&o.AdminAddressPath, "admin-address-path", "", "Admin address path")
	fs.Uint32Var(&o.RestartEpoch, "restart-epoch", 0, "hot restart epoch #")
	fs.Uint32Var(&o.BaseID, "base-id", 0, "Base ID so that multiple envoys can run on the same host if needed")
	fs.StringVar(&o.BaseIDPath, "base-id-path", "", "Path to which the base ID is written")
	fs.BoolVar(&o.UseDynamicBaseID, "use-dynamic-base-id", false, "Select an unused base ID dynamically")
	fs.Uint32Var(&drainS, "drain-time-s", 600, "Hot restart and LDS removal drain time in seconds")
	fs.StringVar(&drainStrategy, "drain-strategy", "gradual", "Hot restart drain sequence behaviour, one of (gradual, immediate)")
	fs.Uint32Var(&parentS, "parent-shutdown-time-s", 900, "Hot restart parent shutdown time in seconds")
	fs.StringVar(&o.ServiceCluster, "service-cluster", "", "Cluster name")
	fs.StringVar(&o.ServiceNode, "service-node", "", "Node name")
	fs.StringVar(&o.ServiceZone, "service-zone", "", "Zone name")
	fs.StringVarP(&logLevel, "log-level", "l", "info", "Log levels: [trace][debug][info][warning|warn][error][critical][off]")
	fs.StringVar(&o.ComponentLogLevel, "component-log-level", "", "Comma-separated list of component log levels")
	fs.StringVar(&o.LogPath, "log-path", "", "Path to logfile")
	fs.StringVar(&o.LogFormat, "log-format", DefaultLogFormat, "Log message format in spdlog syntax")
	fs.Uint32Var(&o.Concurrency, "concurrency", uint32(runtime.NumCPU()), "# of worker threads to run")
	fs.StringVar(&o.LocalAddressIPVersion, "local-address-ip-version", "v4", "The local IP address version (v4 or v6)")
	fs.StringVar(&mode, "mode", "serve", "One of 'serve' (default; validate configs and then serve traffic normally) or 'validate' (validate configs and exit) or 'init_only'")
	fs.BoolVar(&o.HotRestartVersion, "hot-restart-version", false, "Hot restart compatibility version")
	fs.BoolVar(&o.DisableHotRestart, "disable-hot-restart", false, "Disable hot restart functionality")
	fs.BoolVar(&o.Version, "version", false, "Displays version information and exits")
	fs.BoolVar(&o.AllowUnknownStaticFields, "allow-unknown-static-fields", false, "Allow unknown fields in static configuration")
	// Accepted for compatibility with the agents' command lines; they change nothing here.
	fs.Uint32("file-flush-interval-msec", 10000, "Interval for log flushing in msec")
	fs.Uint64("max-obj-name-len", 60, "Deprecated")
	fs.Bool("allow-unknown-fields", false, "Deprecated alias of --allow-unknown-static-fields")
	fs.Bool("log-format-escaped", false, "Escape c-style escape sequences in the application logs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, &ParseError{Msg: "USAGE:\n\n   meshlab proxy  [flags]\n\nWhere:\n\n" + fs.FlagUsages(), Help: true}
		}
		return o, &ParseError{Msg: "PARSE ERROR: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return o, &ParseError{Msg: fmt.Sprintf("PARSE ERROR: Argument: %s\n             Couldn't find match for argument", fs.Arg(0))}
	}
	o.DrainTime = time.Duration(drainS) * time.Second
	o.ParentShutdownTime = time.Duration(parentS) * time.Second
	switch drainStrategy {
	case "gradual":
		o.DrainStrategy = DrainGradual
	case "immediate":
		o.DrainStrategy = DrainImmediate
	default:
		return o, &ParseError{Msg: fmt.Sprintf("error: unknown drain-strategy '%s'", drainStrategy)}
	}
	switch mode {
	case "serve":
		o.Mode = ModeServe
	case "validate":
		o.Mode = ModeValidate
	case "init_only":
		o.Mode = ModeInitOnly
	default:
		return o, &ParseError{Msg: fmt.Sprintf("error: unknown mode '%s'", mode)}
	}
	if o.LocalAddressIPVersion != "v4" && o.LocalAddressIPVersion != "v6" {
		return o, &ParseError{Msg: fmt.Sprintf("error: unknown IP address version '%s'", o.LocalAddressIPVersion)}
	}
	lvl, err := envoylog.ParseLevel(logLevel)
	if err != nil {
		return o, &ParseError{Msg: "error: invalid log level specified '" + logLevel + "'"}
	}
	o.LogLevel, o.LogLevelName = lvl, envoylog.LevelName(lvl)
	if o.ComponentLevels, err = envoylog.ParseComponentLevels(o.ComponentLogLevel); err != nil {
		return o, &ParseError{Msg: "error: " + err.Error()}
	}
	if o.RestartEpoch > 0 && o.UseDynamicBaseID {
		return o, &ParseError{Msg: fmt.Sprintf("error: cannot use --restart-epoch=%d with --use-dynamic-base-id", o.RestartEpoch)}
	}
	return o, nil
}

// IsParseError reports whether err is a command line error.
func IsParseError(err error) bool {
	var pe *ParseError
	return errors.As(err, &pe)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// DefaultLogFormat is Envoy's --log-format default.
const DefaultLogFormat = "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v"
