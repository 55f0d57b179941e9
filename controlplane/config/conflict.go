package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
)

// Optimistic concurrency, as the API server keeps it: an object written with a
// metadata.resourceVersion over one the store holds is taken only when that version is
// the stored object's (kubectl apply's patch carries the file's resourceVersion; the
// API server's update then fails with 409 Conflict when it is not the latest). An
// object written without one is taken over whatever is stored. The store keeps no
// written resourceVersion: the object's is the store's revision (stampCreated).

// ConflictError is Apply's answer to an object written with a resourceVersion that is
// not the stored object's: nothing changed.
type ConflictError struct {
	File    string
	Ref     Ref
	Written string // the object's metadata.resourceVersion
	Stored  int64  // the stored object's
}

// Error says it in the API server's words, without its resource name (the lab's API
// answer names it as kubectl does: Operation cannot be fulfilled on deployments.apps
// "x": ...).
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s: the object has been modified (resourceVersion %s written, %d stored); please apply your changes to the latest version and try again", e.File, e.Ref, e.Written, e.Stored)
}

// takeResourceVersion returns d without metadata.resourceVersion, and the version it
// wrote ("" for none). A resourceVersion that is not a string is a problem of p's, as
// the API server's decoding refuses it.
func takeResourceVersion(d document, p problems) (document, string) {
	meta, _ := d.top["metadata"].(map[string]any)
	v, ok := meta["resourceVersion"]
	if !ok {
		return d, ""
	}
	rv, isString := v.(string)
	if !isString {
		p.addf("metadata.resourceVersion", "must be a string (the API server's version of the object, as get -o yaml prints it), not %v", v)
		return d, ""
	}
	if rv != "" {
		if n, err := strconv.ParseInt(rv, 10, 64); err != nil || n <= 0 {
			// The API server's answer to a version it never gave (an invalid one is a
			// 400 from etcd's versioner).
			p.addf("metadata.resourceVersion", "invalid resource version %q: a version the lab gave (get -o yaml prints it), or none", rv)
			return d, ""
		}
	}
	top := make(map[string]any, len(d.top))
	for k, v := range d.top {
		top[k] = v
	}
	m := make(map[string]any, len(meta))
	for k, v := range meta {
		if k != "resourceVersion" {
			m[k] = v
		}
	}
	top["metadata"] = m
	js, err := json.Marshal(top)
	if err != nil {
		return d, rv
	}
	d.top, d.js = top, js
	return d, rv
}

// checkVersion returns a *ConflictError when an object written with resourceVersion rv
// ("" for none) replaces stored and rv is not stored's.
func checkVersion(file string, o, stored *Object, rv string) error {
	if rv == "" || stored == nil || rv == strconv.FormatInt(stored.ResourceVersion, 10) {
		return nil
	}
	return &ConflictError{File: cmp.Or(file, o.Origin.File), Ref: RefOf(o), Written: rv, Stored: stored.ResourceVersion}
}
