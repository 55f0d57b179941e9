package analyze

import (
	"errors"
	"strings"

	"github.com/meshlab/meshlab/controlplane/config"
)

// Analyze returns every finding about the objects of files, most severe first. It never
// fails: a document that cannot be read is itself a finding (IST0106).
func Analyze(files []config.File) []Finding {
	objs, fs := decodeFiles(files)
	r := newRegistry(objs)
	fs = append(fs, checkRouting(r, objs)...)
	fs = append(fs, checkJWTClaimRoutes(r, objs)...)
	fs = append(fs, checkPorts(objs)...)
	fs = append(fs, checkWorkloads(r, objs)...)
	fs = append(fs, checkSecurity(r, objs)...)
	fs = append(fs, checkAmbient(objs)...)
	fs = append(fs, loaderFindings(files, fs)...)
	sortFindings(fs)
	return fs
}

// loaderFindings runs meshlab's own loader over files and returns what it refuses that
// the checks above did not already report (same object, overlapping field), as schema
// validation errors: such a file would not load in a lab.
func loaderFindings(files []config.File, have []Finding) []Finding {
	_, _, err := (&config.Scenario{}).Apply(files...)
	var list config.ErrorList
	if !errors.As(err, &list) {
		return nil
	}
	var out []Finding
	for _, e := range list {
		ref := Object{Kind: e.Origin.Kind, Namespace: e.Origin.Namespace, Name: e.Origin.Name}
		if ref.Kind == "" || ref.Name == "" {
			ref = Object{Kind: "document", Name: documentName(e.Doc, e.Item)}
		}
		if covered(have, ref, e.Origin.File, e.Field) {
			continue
		}
		out = append(out, Finding{Level: Error, Code: CodeSchemaValidationError, Object: ref, File: e.Origin.File,
			Field: e.Field, Message: "Schema validation error: " + e.Msg})
	}
	return out
}

// covered reports whether a finding about ref already concerns field (one path is a
// prefix of the other), or the whole object could not be decoded.
func covered(have []Finding, ref Object, file, field string) bool {
	for _, f := range have {
		if f.Object != ref || f.File != file {
			continue
		}
		if f.Code == CodeSchemaValidationError && f.Field == "" {
			return true
		}
		if f.Field != "" && field != "" && (strings.HasPrefix(field, f.Field) || strings.HasPrefix(f.Field, field)) {
			return true
		}
	}
	return false
}
