package api

import (
	"time"
)

// PodHistory is what GET /v1/pods/:pod/history answers: the config versions the control
// plane keeps of the pod's proxy, oldest first.
type PodHistory struct {
	Pod       string            `json:"pod"`
	NodeID    string            `json:"nodeId"`
	Snapshots []HistorySnapshot `json:"snapshots"`
}

// HistorySnapshot is one config version of one proxy.
type HistorySnapshot struct {
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	Trigger string    `json:"trigger"`
	// Types holds, by short type (CDS, LDS, ...), the resource count and the proxy's answer.
	Types map[string]HistoryType `json:"types"`
}

// HistoryType is one resource type of a HistorySnapshot.
type HistoryType struct {
	Resources int    `json:"resources"`
	State     string `json:"state,omitempty"` // ACK, NACK, or "" (no answer)
	Error     string `json:"error,omitempty"`
}

// ConfigDiff is what GET /v1/pods/:pod/diff?from=V1&to=V2 answers.
type ConfigDiff struct {
	Pod   string           `json:"pod"`
	From  string           `json:"from"`
	To    string           `json:"to"`
	Types []ConfigTypeDiff `json:"types"`
}

// ConfigTypeDiff is what differs in one resource type (short name: LDS, RDS, ...).
type ConfigTypeDiff struct {
	Type    string                 `json:"type"`
	Added   []string               `json:"added,omitempty"`
	Removed []string               `json:"removed,omitempty"`
	Changed []ConfigResourceChange `json:"changed,omitempty"`
}

// ConfigResourceChange is one changed resource and its changed fields.
type ConfigResourceChange struct {
	Name   string              `json:"name"`
	Fields []ConfigFieldChange `json:"fields"`
}

// ConfigFieldChange is one changed field path; Old and New are JSON texts, "" when absent.
type ConfigFieldChange struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// ErrUnknownVersion is returned for a config version the control plane does not keep.
var ErrUnknownVersion = sentinel("unknown config version", ErrNotFound)
