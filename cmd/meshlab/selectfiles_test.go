package main

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
)

func TestSelectFileObjects(t *testing.T) {
	t.Parallel()
	data := `apiVersion: v1
kind: Service
metadata:
  name: reviews
  labels: {app: reviews, service: reviews}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: bookinfo-reviews
  labels: {account: reviews}
---
# a comment-only document
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: reviews-v3
  labels: {app: reviews, version: v3}
`
	files := []api.ConfigFile{{Name: "bookinfo.yaml", Data: data}, {Name: "other.yaml", Data: "kind: Service\nmetadata: {name: x}\n"}}
	tests := []struct {
		selector string
		want     []string // names kept, in order
	}{
		{"service=reviews", []string{"name: reviews\n"}},
		{"account=reviews", []string{"name: bookinfo-reviews"}},
		{"app=reviews,version=v3", []string{"name: reviews-v3"}},
		{"app in (reviews)", []string{"name: reviews\n", "name: reviews-v3"}},
		{"app=ratings", nil},
	}
	for _, tt := range tests {
		kept, n, err := selectFileObjects(files, tt.selector)
		if err != nil {
			t.Fatalf("%s: %v", tt.selector, err)
		}
		if n != len(tt.want) {
			t.Errorf("%s: kept %d objects, want %d", tt.selector, n, len(tt.want))
		}
		if len(tt.want) == 0 {
			if len(kept) != 0 {
				t.Errorf("%s: kept files %v, want none", tt.selector, kept)
			}
			continue
		}
		if len(kept) != 1 || kept[0].Name != "bookinfo.yaml" {
			t.Fatalf("%s: kept %+v, want bookinfo.yaml alone", tt.selector, kept)
		}
		for _, w := range tt.want {
			if !strings.Contains(kept[0].Data, w) {
				t.Errorf("%s: kept %q, want it to hold %q", tt.selector, kept[0].Data, w)
			}
		}
		if got := strings.Count(kept[0].Data, "kind:"); got != len(tt.want) {
			t.Errorf("%s: kept %d documents, want %d:\n%s", tt.selector, got, len(tt.want), kept[0].Data)
		}
	}
	if _, _, err := selectFileObjects(files, "app in ("); err == nil {
		t.Error("a malformed selector was accepted")
	}
}
