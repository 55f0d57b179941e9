package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestPrintHistoryAndDiff(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 7, 30, 0, 0, time.UTC)
	h := api.PodHistory{Pod: "frontend-v1", Snapshots: []api.HistorySnapshot{
		{Version: "v1", Time: at, Trigger: "start", Types: map[string]api.HistoryType{
			"CDS": {Resources: 6, State: "ACK"}, "LDS": {Resources: 3, State: "ACK"}, "RDS": {Resources: 1, State: "ACK"},
		}},
		{Version: "v2", Time: at.Add(time.Minute), Trigger: "fault: nack", Types: map[string]api.HistoryType{
			"CDS": {Resources: 6, State: "ACK"}, "LDS": {Resources: 4, State: "NACK", Error: "unsupported type google.protobuf.Empty"},
			"RDS": {Resources: 1},
		}},
	}}
	var b bytes.Buffer
	if err := printHistory(&b, h); err != nil {
		t.Fatal(err)
	}
	d := api.ConfigDiff{Pod: "frontend-v1", From: "v1", To: "v2", Types: []api.ConfigTypeDiff{
		{Type: "LDS", Added: []string{"meshlab-fault-nack"}},
		{Type: "RDS", Changed: []api.ConfigResourceChange{{Name: "8080", Fields: []api.ConfigFieldChange{
			{Path: "virtual_hosts[backend].routes[0].route.timeout", Old: `"0s"`, New: `"3s"`},
			{Path: "virtual_hosts[backend].routes[0].name", Old: `"default"`},
		}}}},
	}}
	if err := printDiff(&b, d); err != nil {
		t.Fatal(err)
	}
	if err := printFaults(&b, []api.Fault{
		{ID: "f1", FaultSpec: api.FaultSpec{Kind: api.FaultDelayPush, Pods: []string{"a", "b"}, Delay: 500 * time.Millisecond}, Started: at},
		{ID: "f2", FaultSpec: api.FaultSpec{Kind: api.FaultHoldPush, Pods: []string{"c"}}, Started: at.Add(time.Second)},
	}, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "history-diff-faults", b.Bytes())
}
