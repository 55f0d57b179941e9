package demoapp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestBytesAnswersExactlyNBytes(t *testing.T) {
	srv := httptest.NewServer(newHandler(Config{Ports: []uint16{8080}}, testutil.Logger(t)))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		path     string
		wantCode int
		wantLen  int
		wantBody string // substring of an error body
	}{
		{"/bytes/0", 200, 0, ""},
		{"/bytes/1024", 200, 1024, ""},
		{"/bytes/100000", 200, 100000, ""},
		{"/bytes/10485760", 200, 10 << 20, ""},
		{"/bytes/10485761", 400, -1, `"10485761" is not a byte count between 0 and 10485760`},
		{"/bytes/-1", 400, -1, `"-1" is not a byte count`},
		{"/bytes/lots", 400, -1, `"lots" is not a byte count`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.wantCode, body)
			}
			if tc.wantLen >= 0 {
				if len(body) != tc.wantLen || resp.ContentLength != int64(tc.wantLen) {
					t.Errorf("body %d bytes, content-length %d; want %d", len(body), resp.ContentLength, tc.wantLen)
				}
				if tc.wantLen > 0 && !strings.HasPrefix(bytesChunk(), string(body[:min(len(body), 100)])) {
					t.Errorf("body does not start with the fixed pattern: %q", body[:20])
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
					t.Errorf("content-type %q", ct)
				}
			} else if !strings.Contains(string(body), tc.wantBody) {
				t.Errorf("error body %q lacks %q", body, tc.wantBody)
			}
		})
	}
}
