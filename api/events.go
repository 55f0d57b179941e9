package api

import (
	"time"
)

// Event is one thing that happened in the lab (pod created, epoch live, config pushed,
// NACK...), as the event bus carries it and GET /v1/events streams it.
type Event struct {
	// Seq numbers events from 1 in publication order; it is the SSE event id.
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	Kind    string         `json:"kind"`          // e.g. "pod.created", "epoch.live", "xds.nack"
	Pod     string         `json:"pod,omitempty"` // the pod it concerns, if any
	Message string         `json:"message"`       // one line for people
	Fields  map[string]any `json:"fields,omitempty"`
}
