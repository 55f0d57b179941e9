package kubeedit

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// editHeader is the comment kubectl edit writes above the object.
const editHeader = `# Please edit the object below. Lines beginning with a '#' will be ignored,
# and an empty file will abort the edit. If an error occurs while saving this file will be
# reopened with the relevant failures.
#
`

// Reason is why a saved edit was not applied, written into the file kubectl reopens:
// a head line and its causes.
type Reason struct {
	Head   string
	Causes []string
}

// RenderForEdit is the file kubectl edit opens: its header, the reasons the last save
// failed (none the first time), then the object (JSON) as YAML.
func RenderForEdit(object []byte, reasons []Reason) ([]byte, error) {
	y, err := yaml.JSONToYAML(object)
	if err != nil {
		return nil, err
	}
	return RenderText(y, reasons), nil
}

// RenderText is the file kubectl edit reopens after a save it could not read: its header
// and reasons over the text saved (its comments dropped).
func RenderText(body []byte, reasons []Reason) []byte {
	y := body
	var b bytes.Buffer
	b.WriteString(editHeader)
	for _, r := range reasons {
		if len(r.Causes) > 0 {
			fmt.Fprintf(&b, "# %s:\n", hashLines(r.Head))
		} else {
			fmt.Fprintf(&b, "# %s\n", hashLines(r.Head))
		}
		for _, c := range r.Causes {
			fmt.Fprintf(&b, "# * %s\n", hashLines(c))
		}
		b.WriteString("#\n")
	}
	b.Write(y)
	return b.Bytes()
}

// hashLines keeps a multi-line text inside the header's comment.
func hashLines(s string) string { return strings.ReplaceAll(s, "\n", "\n# ") }

// StripComments drops the lines that begin with '#', as kubectl does before reading
// the file back (a '#' inside a line is YAML's own business).
func StripComments(file []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(file))
	sc.Buffer(make([]byte, 0, 64*1024), len(file)+1)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// ReadEdited reads a saved edit file back as the object's JSON, reporting whether it is
// empty (kubectl's cancel). A syntax error is kubectl's reason to reopen the file.
func ReadEdited(file []byte) (object []byte, empty bool, err error) {
	body := StripComments(file)
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, true, nil
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, false, fmt.Errorf("The edited file had a syntax error: %w", err) //nolint:staticcheck // kubectl's text
	}
	if !bytes.HasPrefix(bytes.TrimSpace(js), []byte("{")) {
		return nil, false, fmt.Errorf("The edited file had a syntax error: the file holds no object") //nolint:staticcheck // kubectl's text
	}
	return js, false, nil
}

// EditorArgs is the command kubectl edit runs the editor with, before the file's path:
// KUBE_EDITOR, else EDITOR, else vi; a value with spaces is split on them, and one with
// quotes or backslashes is given to sh -c (kubectl's defaultEnvEditor). shell reports
// whether the path is to be added to the last argument (sh -c's script) rather than
// appended.
func EditorArgs(getenv func(string) string) (args []string, shell bool) {
	editor := ""
	for _, env := range []string{"KUBE_EDITOR", "EDITOR"} {
		if editor = getenv(env); editor != "" {
			break
		}
	}
	if editor == "" {
		editor = "vi"
	}
	if !strings.Contains(editor, " ") {
		return []string{editor}, false
	}
	if !strings.ContainsAny(editor, "\"'\\") {
		return strings.Split(editor, " "), false
	}
	sh := getenv("SHELL")
	if sh == "" {
		sh = "/bin/bash"
	}
	return []string{sh, "-c", editor}, true
}

// WithPath is the editor's command for the file at path.
func WithPath(args []string, shell bool, path string) []string {
	out := append([]string(nil), args...)
	if shell {
		out[len(out)-1] = fmt.Sprintf("%s %q", out[len(out)-1], path)
		return out
	}
	return append(out, path)
}
