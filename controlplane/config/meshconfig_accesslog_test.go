package config

import (
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

func TestMeshConfigAccessLogModel(t *testing.T) {
	t.Parallel()
	mesh := func(spec string) string {
		return "apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec: " + spec + "\n"
	}
	tests := []struct {
		name     string
		docs     []string
		wantPath string
		wantEnc  model.AccessLogEncoding
		wantFmt  string
	}{
		{name: "no MeshConfig: on, to the proxy's stdout", wantPath: "/dev/stdout"},
		{name: "MeshConfig without accessLogFile", docs: []string{mesh("{rootNamespace: root}")}, wantPath: "/dev/stdout"},
		{name: "accessLogFile empty turns logs off", docs: []string{mesh(`{accessLogFile: ""}`)}, wantPath: ""},
		{name: "file, JSON and format", docs: []string{mesh(`{accessLogFile: /tmp/a.log, accessLogEncoding: JSON, accessLogFormat: '{"code": "%RESPONSE_CODE%"}'}`)},
			wantPath: "/tmp/a.log", wantEnc: model.AccessLogJSON, wantFmt: `{"code": "%RESPONSE_CODE%"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Load("t.yaml", []byte(docs(append([]string{helloYAML(t)}, tt.docs...)...)))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			m, err := s.Build(defaultOpts)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if got := m.Mesh.AccessLogPath(); got != tt.wantPath {
				t.Errorf("AccessLogPath() = %q, want %q", got, tt.wantPath)
			}
			if m.Mesh.AccessLogEncoding != tt.wantEnc || m.Mesh.AccessLogFormat != tt.wantFmt {
				t.Errorf("encoding, format = %s, %q, want %s, %q", m.Mesh.AccessLogEncoding, m.Mesh.AccessLogFormat, tt.wantEnc, tt.wantFmt)
			}
		})
	}
}
