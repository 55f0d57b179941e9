package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestPrintChanges(t *testing.T) {
	t.Parallel()
	lines := []string{"VirtualService default/reviews configured", "Service default/backend unchanged", "odd line"}
	var text bytes.Buffer
	if err := printChanges(&text, "", lines); err != nil {
		t.Fatal(err)
	}
	if want := "VirtualService default/reviews configured\nService default/backend unchanged\nodd line\n"; text.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), want)
	}
	var js bytes.Buffer
	if err := printChanges(&js, "json", lines); err != nil {
		t.Fatal(err)
	}
	var got []objectChange
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("json %q: %v", js.String(), err)
	}
	want := []objectChange{
		{Kind: "VirtualService", Namespace: "default", Name: "reviews", Action: "configured"},
		{Kind: "Service", Namespace: "default", Name: "backend", Action: "unchanged"},
		{Action: "odd line"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("json = %+v, want %+v", got, want)
	}
	js.Reset()
	if err := printChanges(&js, "json", nil); err != nil || js.String() != "[]\n" {
		t.Errorf("no change: %q, %v; want []", js.String(), err)
	}
}
