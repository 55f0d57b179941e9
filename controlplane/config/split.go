package config

import (
	"bytes"
	"strings"

	"sigs.k8s.io/yaml"
)

// document is one YAML document of a multi-document file.
type document struct {
	index int    // 1-based
	item  int    // 1-based index in its List document's items; 0 when not a List's item
	line  int    // 1-based line of its first content line in the file
	data  []byte // the document's text
	// parsed is set once js and top hold the document's JSON form and top level (nil when
	// it did not parse).
	parsed bool
	js     []byte
	top    map[string]any
}

// padded returns the document preceded by blank lines, so that the YAML decoder's line
// numbers are the file's.
func (d document) padded() []byte {
	return append(bytes.Repeat([]byte{'\n'}, d.line-1), d.data...)
}

// splitDocuments cuts data at "---" lines, as a YAML stream is. Text after "---" on the
// same line stays with the document it starts (columns kept). Empty documents are kept so
// that document numbers match what an editor shows; decoding skips them.
func splitDocuments(data []byte) []document {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	lines := strings.SplitAfter(string(data), "\n")
	var docs []document
	cur := document{index: 1, line: 1}
	var b strings.Builder
	for i, l := range lines {
		if isSeparator(l) {
			if i > 0 {
				cur.data = []byte(b.String())
				docs = append(docs, cur)
				cur = document{index: cur.index + 1}
				b.Reset()
			}
			cur.line = i + 1
			b.WriteString("   ")
			b.WriteString(l[3:])
			continue
		}
		b.WriteString(l)
	}
	cur.data = []byte(b.String())
	return append(docs, cur)
}

// isSeparator reports whether line starts a new YAML document.
func isSeparator(line string) bool {
	if !strings.HasPrefix(line, "---") {
		return false
	}
	rest := line[3:]
	return rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}

// yamlToJSON converts one YAML document to JSON, refusing duplicate keys.
func yamlToJSON(data []byte) ([]byte, error) {
	return yaml.YAMLToJSONStrict(data)
}
