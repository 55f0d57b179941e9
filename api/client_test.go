package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// serve answers on a unix socket in a temporary directory with h and returns a client
// of it.
func serve(t *testing.T, h http.Handler) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	c := NewUnixClient(sock)
	t.Cleanup(func() {
		c.Close()
		_ = srv.Close()
	})
	return c
}

// TestClientErrorClasses holds the status code -> class mapping: every error answer is
// an *Error matching exactly its class, reading as the server's message.
func TestClientErrorClasses(t *testing.T) {
	t.Parallel()
	classes := []error{ErrInvalid, ErrNotFound, ErrConflict, ErrTimeout, ErrInternal, ErrUnavailable}
	tests := []struct {
		name    string
		status  int
		body    string
		want    error
		wantMsg string
	}{
		{name: "bad request", status: 400, body: `{"error":"lines: want 0..1000"}`, want: ErrInvalid, wantMsg: "lines: want 0..1000"},
		{name: "too large", status: 413, body: `{"error":"decode request: too large"}`, want: ErrInvalid, wantMsg: "decode request: too large"},
		{name: "unprocessable", status: 422, body: `{"error":"vs.yaml: VirtualService default/x: spec.hosts: at least one host is required"}`, want: ErrInvalid, wantMsg: "vs.yaml: VirtualService default/x: spec.hosts: at least one host is required"},
		{name: "not found", status: 404, body: `{"error":"pod \"nope\": unknown pod"}`, want: ErrNotFound, wantMsg: `pod "nope": unknown pod`},
		{name: "conflict", status: 409, body: `{"error":"fault already active: f1"}`, want: ErrConflict, wantMsg: "fault already active: f1"},
		{name: "gateway timeout", status: 504, body: `{"error":"context deadline exceeded"}`, want: ErrTimeout, wantMsg: "context deadline exceeded"},
		{name: "internal", status: 500, body: `{"error":"boom"}`, want: ErrInternal, wantMsg: "boom"},
		{name: "not the API's JSON", status: 502, body: "upstream gone\n", want: ErrInternal, wantMsg: "call lab API GET /v1/pods: 502 Bad Gateway: upstream gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			_, err := c.Pods(t.Context())
			for _, class := range classes {
				if got := errors.Is(err, class); got != errors.Is(class, tt.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, class, got)
				}
			}
			if err == nil || err.Error() != tt.wantMsg {
				t.Errorf("err = %v, want %q", err, tt.wantMsg)
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != tt.status || ae.Path != "/v1/pods" || ae.Method != http.MethodGet {
				t.Errorf("errors.As *Error: %+v", ae)
			}
		})
	}
}

// TestClientUnavailable: no lab on the socket is ErrUnavailable, and the dial error is
// kept (wrapped) for whoever wants it.
func TestClientUnavailable(t *testing.T) {
	t.Parallel()
	c := NewUnixClient(filepath.Join(t.TempDir(), "none.sock"))
	defer c.Close()
	_, err := c.Lab(t.Context())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOENT) || errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v, want ErrUnavailable wrapping ENOENT", err)
	}
}

// TestClientApplyTypedChanges: apply sends the files as one request and answers the
// lab's changes as values, not lines to parse back.
func TestClientApplyTypedChanges(t *testing.T) {
	t.Parallel()
	want := []Change{
		{Kind: "VirtualService", Namespace: "default", Name: "reviews", Action: ActionConfigured},
		{Kind: PodKind, Namespace: "default", Name: "reviews-v2-0", Action: ActionFailed, Error: "not ready after 30s"},
	}
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req ApplyRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/apply" || r.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Files) != 1 || req.Files[0].Name != "vs.yaml" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		_ = json.NewEncoder(w).Encode(ChangeResult{Changes: want})
	}))
	got, err := c.Apply(t.Context(), []ConfigFile{{Name: "vs.yaml", Data: "kind: VirtualService"}})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Apply = %+v, %v; want %+v", got, err, want)
	}
}

func TestChangeString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		c    Change
		want string
	}{
		{Change{Kind: "VirtualService", Namespace: "default", Name: "reviews", Action: ActionConfigured}, "VirtualService default/reviews configured"},
		{Change{Kind: PodKind, Namespace: "shop", Name: "cart-0", Action: ActionCreated}, "pod shop/cart-0 created"},
		{Change{Kind: PodKind, Namespace: "default", Name: "x", Action: ActionDeleted, Error: "kill agent: no such process"}, "pod default/x deleted with errors: kill agent: no such process"},
		{Change{Kind: PodKind, Namespace: "default", Name: "x", Action: ActionFailed, Error: "exit 1 (meshlab describe pod x)"}, "pod default/x FAILED: exit 1 (meshlab describe pod x)"},
	} {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// TestSentinelClasses: the lab's own sentinels belong to the class the server answers
// them with, so in-process callers and remote ones branch the same way; wrapping keeps it.
func TestSentinelClasses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err, class error
	}{
		{ErrUnknownPod, ErrNotFound},
		{ErrUnknownFault, ErrNotFound},
		{ErrUnknownVersion, ErrNotFound},
		{ErrNoGuide, ErrNotFound},
		{ErrFaultExists, ErrConflict},
		{ErrLastStep, ErrConflict},
		{ErrNoSolution, ErrConflict},
		{ErrNoSidecar, ErrConflict},
		{ErrBadFault, ErrInvalid},
		{ErrBadTraffic, ErrInvalid},
		{ErrCARequest, ErrInvalid},
		{&ConfigError{Err: errors.New("bad")}, ErrInvalid},
	} {
		wrapped := fmt.Errorf("pod %q: %w", "x", tt.err)
		if !errors.Is(wrapped, tt.err) || !errors.Is(wrapped, tt.class) {
			t.Errorf("%v: not %v", wrapped, tt.class)
		}
		for _, other := range []error{ErrInvalid, ErrNotFound, ErrConflict, ErrInternal} {
			if !errors.Is(other, tt.class) && errors.Is(tt.err, other) {
				t.Errorf("%v is also %v", tt.err, other)
			}
		}
	}
	if errors.Is(ErrUnknownPod, ErrUnknownFault) {
		t.Error("two sentinels of one class match each other")
	}
}

// TestClientBoundsTheAnswer: an answer above MaxAnswerBytes is refused after reading
// just past the limit, not held whole; one at the limit's side is decoded.
func TestClientBoundsTheAnswer(t *testing.T) {
	t.Parallel()
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("version") == "1" {
			_, _ = io.WriteString(w, `{"version":2,"names":{}}`)
			return
		}
		chunk := make([]byte, 1<<20)
		for i := range chunk {
			chunk[i] = ' '
		}
		for range MaxAnswerBytes/len(chunk) + 8 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	if nt, err := c.NameTable(t.Context(), "a", 1); err != nil || nt.Version != 2 {
		t.Fatalf("a small answer: %+v, %v", nt, err)
	}
	_, err := c.NameTable(t.Context(), "a", 0)
	want := fmt.Sprintf("read lab API /v1/agents/a/nametable?version=0: the answer is larger than the limit of %d bytes", MaxAnswerBytes)
	if err == nil || err.Error() != want {
		t.Fatalf("an answer above the limit: %v", err)
	}
}
