package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

func TestProxySettingsJSON(t *testing.T) {
	var s agentapi.ProxySettings
	in := `{"logLevel": "debug", "concurrency": 4, "drainDuration": "1.5s", "parentShutdownDuration": 3000000000, "proxyPath": "/opt/envoy"}`
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	want := agentapi.ProxySettings{LogLevel: "debug", Concurrency: 4, DrainDuration: agentapi.Duration(1500 * time.Millisecond),
		ParentShutdownDuration: agentapi.Duration(3 * time.Second), ProxyPath: "/opt/envoy"}
	if s != want {
		t.Errorf("decoded %+v, want %+v", s, want)
	}
	out, _ := json.Marshal(s)
	if !strings.Contains(string(out), `"drainDuration":"1.5s"`) || !strings.Contains(string(out), `"parentShutdownDuration":"3s"`) {
		t.Errorf("encoded %s", out)
	}
	for _, bad := range []string{`{"drainDuration": "soon"}`, `{"drainDuration": true}`} {
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
}

func TestProxySettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    agentapi.ProxySettings
		want string
	}{
		{name: "zero is the defaults", s: agentapi.ProxySettings{}},
		{name: "bad level", s: agentapi.ProxySettings{LogLevel: "loud"}, want: `log level "loud"`},
		{name: "negatives", s: agentapi.ProxySettings{Concurrency: -1, DrainDuration: -1, ParentShutdownDuration: -1},
			want: "concurrency -1 is negative\ndrain duration -1ns is negative\nparent shutdown duration -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateSettings(tc.s)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("validate = %v, want %q", err, tc.want)
			}
		})
	}
	c := Config{}.withDefaults()
	if got := settingsWithDefaults(c.settings()); got != settingsWithDefaults(agentapi.ProxySettings{}) {
		t.Errorf("a default config's settings %+v differ from the default settings", got)
	}
}

// FuzzProxySettings feeds PUT /proxy-config bodies to the decoder and validation: no
// panic, and whatever validates survives a round trip.
func FuzzProxySettings(f *testing.F) {
	f.Add(`{"logLevel": "debug", "concurrency": 4, "drainDuration": "1.5s"}`)
	f.Add(`{"drainDuration": 12}`)
	f.Add(`{"parentShutdownDuration": "-3h"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, body string) {
		var s agentapi.ProxySettings
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			return
		}
		if validateSettings(s) != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back agentapi.ProxySettings
		if err := json.Unmarshal(out, &back); err != nil || back != s {
			t.Errorf("round trip %s -> %+v (%v), want %+v", out, back, err, s)
		}
	})
}
