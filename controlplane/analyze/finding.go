package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ExitIssues is istioctl analyze's exit code when analyzers found issues at or above the
// failure threshold.
const ExitIssues = 79

// Level is a finding's severity, as Istio's analysis levels.
type Level int

// Levels, least severe first.
const (
	Info Level = iota
	Warning
	Error
)

// String returns the level as istioctl prints it.
func (l Level) String() string {
	switch l {
	case Info:
		return "Info"
	case Warning:
		return "Warning"
	case Error:
		return "Error"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// MarshalText renders the level for JSON and YAML output.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// ParseLevel parses "info", "warning" or "error" (any case).
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(s) {
	case "info":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return 0, fmt.Errorf("parse level %q: want info, warning or error", s)
}

// Codes of the findings. IST codes are Istio's (pkg/config/analysis/msg/messages.yaml);
// ML codes are meshlab's, for checks Istio has no analyzer for.
const (
	CodeDeprecated                                = "IST0002"
	CodeReferencedResourceNotFound                = "IST0101"
	CodeSchemaValidationError                     = "IST0106"
	CodeConflictingMeshGatewayVirtualServiceHosts = "IST0109"
	CodeMTLSPolicyConflict                        = "IST0113"
	CodePortNameNotUnderConvention                = "IST0118"
	CodeNoMatchingWorkloadsFound                  = "IST0127"
	CodeSchemaWarning                             = "IST0133"
	CodeDestinationRuleSubsetNotSelectPods        = "IST0173"
	CodeUnknownDestinationRuleHost                = "IST0174"
	CodeMultipleMeshWidePolicies                  = "ML0101"
	CodeConflictingPeerAuthentication             = "ML0102"
	CodeServiceSelectsNoPods                      = "ML0103"
	CodeWorkloadInNoService                       = "ML0104"
	CodeAppProtocolNameMismatch                   = "ML0105"
	CodeVirtualServiceHostNotFound                = "ML0107"
	// Ambient mode (ambient.go).
	CodeNamespaceMultipleInjectionLabels = "IST0123"
	CodeNegativeConditionStatus          = "IST0171"
	CodeDataplaneModeInvalid             = "ML0110"
	CodeInjectedAndAmbient               = "ML0111"
	CodeZtunnelPartialPolicy             = "ML0112"
)

// Object names the object a finding is about.
type Object struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String renders the object as istioctl does: "Kind namespace/name".
// A document that could not be read is "document N".
func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Finding is one problem.
type Finding struct {
	Level   Level  `json:"level"`
	Code    string `json:"code"`
	Object  Object `json:"object"`
	File    string `json:"file,omitempty"`
	Field   string `json:"field,omitempty"` // path of the offending field, e.g. "spec.http[0].route[0].destination.host"
	Message string `json:"message"`
}

// String renders the finding as istioctl analyze's text output, plus meshlab's location:
// "Error [IST0101] (VirtualService default/reviews hello.yaml spec.hosts[0]) message".
func (f Finding) String() string {
	loc := f.Object.String()
	if f.File != "" {
		loc += " " + f.File
	}
	if f.Field != "" {
		loc += " " + f.Field
	}
	return fmt.Sprintf("%s [%s] (%s) %s", f.Level, f.Code, loc, f.Message)
}

// Max returns the highest level among findings, and false when there are none.
func Max(findings []Finding) (Level, bool) {
	if len(findings) == 0 {
		return 0, false
	}
	m := Info
	for _, f := range findings {
		m = max(m, f.Level)
	}
	return m, true
}

// sortFindings orders findings as istioctl does: most severe first, then by object, field
// and code, so output is deterministic.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(b.Level, a.Level),
			cmp.Compare(a.Object.Kind, b.Object.Kind),
			cmp.Compare(a.Object.Namespace, b.Object.Namespace),
			cmp.Compare(a.Object.Name, b.Object.Name),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Code, b.Code),
		)
	})
}
