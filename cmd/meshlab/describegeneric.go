package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// kubectl's generic describer, which it uses for every kind it has no describer of its
// own for: custom resources, so Istio's kinds and the Gateway API's. It prints the
// object's name, namespace, labels and annotations, then every other field of the object
// as it is, sorted by name at each level and labelled in words ("apiVersion" as "API
// Version", "gatewayClassName" as "Gateway Class Name"), then the object's events.

// isCustomKind reports whether kubectl knows k through a CustomResourceDefinition (one
// of those `get crd` lists), and so describes it with its generic describer.
func isCustomKind(k api.Kind) bool {
	return k.Group != "" && slices.Contains(crdNames, k.Resource(true)+"."+k.Group)
}

// describeCustomObject describes the object of kind k as kubectl does a custom
// resource: as the lab's Kubernetes view shows it (with its status and creation time),
// else as written.
func describeCustomObject(cmd *cobra.Command, c *api.Client, k api.Kind, namespace, name string) error {
	ctx := cmd.Context()
	var raw []byte
	views, err := c.KubeObjects(ctx, k.Kind, namespace, name, "")
	if err != nil {
		return err
	}
	for _, v := range views {
		if v.Name == name {
			raw = v.Object
			break
		}
	}
	if raw == nil {
		objs, err := c.Objects(ctx, k.Kind, namespace, name)
		if err != nil {
			return err
		}
		if len(objs) == 0 {
			return notFound(k, name)
		}
		raw = objs[0].Object
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return fmt.Errorf("describe %s %s: %w", k.Resource(false), name, err)
	}
	if meta, ok := obj["metadata"].(map[string]any); ok && namespace != "" && stringAt(meta, "namespace") == "" {
		meta["namespace"] = namespace // as the API server writes it: the lab keeps it as written
	}
	return describeCustom(cmd.OutOrStdout(), obj)
}

// describeCustom writes obj (decoded with json.Number) as kubectl describe does a custom
// resource. A lab records no events for its objects: "Events: <none>", as kubectl prints
// an object without any.
func describeCustom(w io.Writer, obj map[string]any) error {
	d := &describeWriter{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	meta, _ := obj["metadata"].(map[string]any)
	d.line(0, "Name:\t%s", stringAt(meta, "name"))
	d.line(0, "Namespace:\t%s", stringAt(meta, "namespace"))
	d.pairs("Labels", "=", stringMap(meta["labels"]))
	d.pairs("Annotations", ": ", stringMap(meta["annotations"]))
	d.content(0, obj, "", ".metadata.managedFields", ".metadata.name", ".metadata.namespace", ".metadata.labels", ".metadata.annotations")
	d.line(0, "Events:\t<none>")
	return d.tw.Flush()
}

// content writes the fields of m at level, sorted by name, maps and lists as nested
// blocks, every other value on its field's line; the fields whose path (".a.b") is in
// skip are left out.
func (d *describeWriter) content(level int, m map[string]any, path string, skip ...string) {
	for _, field := range slices.Sorted(maps.Keys(m)) {
		p := path + "." + field
		if slices.Contains(skip, p) {
			continue
		}
		switch v := m[field].(type) {
		case map[string]any:
			d.line(level, "%s:", fieldLabel(field))
			d.content(level+1, v, p, skip...)
		case []any:
			d.line(level, "%s:", fieldLabel(field))
			for _, item := range v {
				if sub, ok := item.(map[string]any); ok {
					d.content(level+1, sub, p, skip...)
				} else {
					d.line(level+1, "%v", item)
				}
			}
		default:
			d.line(level, "%s:\t%v", fieldLabel(field), v)
		}
	}
}

// describeAcronyms are the words kubectl writes in capitals in a field's label.
var describeAcronyms = []string{"API", "URL", "UID", "OSB", "GUID"}

// fieldLabel is kubectl's label of a field: its camel-case words capitalised and joined by
// spaces ("creationTimestamp" as "Creation Timestamp", "uid" as "UID"); a field with a
// character other than a letter or '-' in it is left as it is ("app.kubernetes.io/name",
// "hbone_mtls_port").
func fieldLabel(field string) string {
	if strings.IndexFunc(field, func(r rune) bool { return !unicode.IsLetter(r) && r != '-' }) != -1 {
		return field
	}
	words := camelWords(field)
	for i, w := range words {
		if slices.Contains(describeAcronyms, strings.ToUpper(w)) {
			words[i] = strings.ToUpper(w)
			continue
		}
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		words[i] = string(r)
	}
	return strings.Join(words, " ")
}

// camelWords splits s where its characters change class (lower case, upper case, other),
// an upper-case letter before lower-case ones starting their word: "gatewayClassName" is
// gateway Class Name, "HTTPRoute" HTTP Route, "a-b" a - b.
func camelWords(s string) []string {
	class := func(r rune) int {
		switch {
		case unicode.IsLower(r):
			return 1
		case unicode.IsUpper(r):
			return 2
		case unicode.IsDigit(r):
			return 3
		}
		return 4
	}
	var runs [][]rune
	last := 0
	for _, r := range s {
		if c := class(r); c == last && len(runs) > 0 {
			runs[len(runs)-1] = append(runs[len(runs)-1], r)
		} else {
			runs = append(runs, []rune{r})
			last = c
		}
	}
	for i := 0; i+1 < len(runs); i++ {
		if unicode.IsUpper(runs[i][0]) && unicode.IsLower(runs[i+1][0]) {
			n := len(runs[i])
			runs[i+1] = append([]rune{runs[i][n-1]}, runs[i+1]...)
			runs[i] = runs[i][:n-1]
		}
	}
	var out []string
	for _, r := range runs {
		if len(r) > 0 {
			out = append(out, string(r))
		}
	}
	return out
}

func stringAt(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// stringMap is a map of labels or annotations as a decoded object holds it.
func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}
