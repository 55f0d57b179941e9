package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// accessLogOperator is the shape of one Envoy command operator: a name, an optional
// parenthesised argument and an optional :max_length.
var accessLogOperator = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\([^)]*\))?(:[0-9]+)?$`) })

// validateAccessLog checks a MeshConfig's accessLogFile, accessLogEncoding and
// accessLogFormat as Istio reads them: the format is an Envoy format string for TEXT and a
// JSON object of format strings for JSON. Operators the proxy does not know are refused
// by the proxy (a NACK), not here.
func validateAccessLog(mc *meshv1alpha1.MeshConfig, p problems) {
	if f := mc.GetAccessLogFile(); f != "" && !strings.HasPrefix(f, "/") {
		p.addf("spec.accessLogFile", "%q must be an absolute path (/dev/stdout is the proxy's log), or \"\" to turn access logs off", f)
	}
	if _, ok := meshv1alpha1.MeshConfig_AccessLogEncoding_name[int32(mc.GetAccessLogEncoding())]; !ok {
		p.addf("spec.accessLogEncoding", "%d is not an encoding (TEXT or JSON)", mc.GetAccessLogEncoding())
	}
	format := mc.GetAccessLogFormat()
	if format == "" {
		return
	}
	if mc.GetAccessLogEncoding() == meshv1alpha1.MeshConfig_JSON {
		var obj map[string]any
		if err := json.Unmarshal([]byte(format), &obj); err != nil {
			p.addf("spec.accessLogFormat", "with accessLogEncoding JSON must be a JSON object of format strings: %v", err)
			return
		}
		checkJSONLogFormat(obj, "spec.accessLogFormat", p)
		return
	}
	if msg := checkTextLogFormat(format); msg != "" {
		p.addf("spec.accessLogFormat", "%s", msg)
	}
}

func checkJSONLogFormat(obj map[string]any, f string, p problems) {
	for _, k := range sortedKeys(obj) {
		switch v := obj[k].(type) {
		case string:
			if msg := checkTextLogFormat(v); msg != "" {
				p.addf(f, "%s: %s", k, msg)
			}
		case map[string]any:
			checkJSONLogFormat(v, f, p)
		default:
			p.addf(f, "%s: must be a format string or a nested object", k)
		}
	}
}

// checkTextLogFormat returns what is wrong with an Envoy format string, or "".
func checkTextLogFormat(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if strings.HasPrefix(s[i:], "%%") {
			i++
			continue
		}
		end := strings.IndexByte(s[i+1:], '%')
		if end < 0 {
			return fmt.Sprintf("unterminated command operator at position %d (write %%%% for a literal %%)", i)
		}
		if cmd := s[i+1 : i+1+end]; !accessLogOperator().MatchString(cmd) {
			return fmt.Sprintf("%q is not a command operator (OPERATOR, OPERATOR(arg) or OPERATOR(arg):length)", "%"+cmd+"%")
		}
		i += end + 1
	}
	return ""
}

// accessLogModel fills mesh's access log settings from a MeshConfig object. Istio's
// accessLogFile "" (written) turns logs off; not written, meshlab's default applies.
func accessLogModel(o *Object, mesh *model.MeshConfig) {
	mc := o.MeshConfig
	mesh.AccessLogFile = mc.GetAccessLogFile()
	mesh.AccessLogOff = mc.GetAccessLogFile() == "" && specHas(o.JSON, "accessLogFile")
	if mc.GetAccessLogEncoding() == meshv1alpha1.MeshConfig_JSON {
		mesh.AccessLogEncoding = model.AccessLogJSON
	}
	mesh.AccessLogFormat = mc.GetAccessLogFormat()
}

// specHas reports whether the document js sets spec.field (with any value).
func specHas(js []byte, field string) bool {
	var doc struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if json.Unmarshal(js, &doc) != nil {
		return false
	}
	_, ok := doc.Spec[field]
	return ok
}
