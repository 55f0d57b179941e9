package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/meshlab/meshlab/internal/testutil"
)

// bidiClient is a minimal WebDriver BiDi client (https://w3c.github.io/webdriver-bidi/):
// commands go out as JSON text frames with an id, and the reply with the same id is
// handed back to the caller; events are ignored.
type bidiClient struct {
	ws *websocket.Conn

	mu      sync.Mutex
	nextID  int
	pending map[int]chan bidiReply
	err     error // set when the reader stops; every later call fails with it

	done chan struct{}
}

// bidiReply is a command's reply: success with a result, or an error.
type bidiReply struct {
	Type    string          `json:"type"`
	ID      *int            `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

// dialBiDi connects to a BiDi endpoint such as ws://127.0.0.1:PORT/session. origin is
// sent as the Origin header (golang.org/x/net/websocket always sends one), so the browser
// must allow it (Firefox: --remote-allow-origins).
func dialBiDi(url, origin string) (*bidiClient, error) {
	ws, err := websocket.Dial(url, "", origin)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.MaxPayloadBytes = 64 << 20 // full-page screenshots come back as base64
	c := &bidiClient{ws: ws, pending: map[int]chan bidiReply{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// read dispatches replies to their callers until the connection closes.
func (c *bidiClient) read() {
	defer close(c.done)
	for {
		var msg []byte
		if err := websocket.Message.Receive(c.ws, &msg); err != nil {
			c.fail(fmt.Errorf("read bidi message: %w", err))
			return
		}
		var r bidiReply
		if err := json.Unmarshal(msg, &r); err != nil {
			c.fail(fmt.Errorf("decode bidi message %.200s: %w", msg, err))
			return
		}
		if r.ID == nil { // an event, or an error about no command
			continue
		}
		c.mu.Lock()
		ch := c.pending[*r.ID]
		delete(c.pending, *r.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// fail records why the connection stopped and wakes every waiting caller.
func (c *bidiClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

// call sends one command and decodes its result into out (when out is not nil).
func (c *bidiClient) call(ctx context.Context, method string, params, out any) error {
	if params == nil {
		params = struct{}{}
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("call %s: %w", method, err)
	}
	c.nextID++
	id := c.nextID
	ch := make(chan bidiReply, 1)
	c.pending[id] = ch
	c.mu.Unlock()

	cmd := map[string]any{"id": id, "method": method, "params": params}
	if err := websocket.JSON.Send(c.ws, cmd); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return fmt.Errorf("call %s: %w", method, err)
		}
		if r.Type != "success" {
			return fmt.Errorf("call %s: %s: %s", method, r.Error, r.Message)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(r.Result, out); err != nil {
			return fmt.Errorf("decode %s result: %w", method, err)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("call %s: %w", method, ctx.Err())
	}
}

// close closes the connection and waits for the reader to stop.
func (c *bidiClient) close() {
	c.ws.Close()
	<-c.done
}

// bidiPage is one browsing context (a tab) of a BiDi session.
type bidiPage struct {
	c       *bidiClient
	context string
}

// newBiDiPage starts a session and returns its first top-level browsing context.
func newBiDiPage(ctx context.Context, c *bidiClient) (*bidiPage, error) {
	if err := c.call(ctx, "session.new", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
		return nil, err
	}
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := c.call(ctx, "browsingContext.getTree", map[string]any{"maxDepth": 0}, &tree); err != nil {
		return nil, err
	}
	if len(tree.Contexts) == 0 {
		return nil, errors.New("get browsing context: the browser has no top-level context")
	}
	return &bidiPage{c: c, context: tree.Contexts[0].Context}, nil
}

// setViewport sizes the page's viewport in CSS pixels.
func (p *bidiPage) setViewport(ctx context.Context, width, height int) error {
	return p.c.call(ctx, "browsingContext.setViewport", map[string]any{
		"context": p.context, "viewport": map[string]int{"width": width, "height": height},
	}, nil)
}

// navigate loads url and waits until the document is complete.
func (p *bidiPage) navigate(ctx context.Context, url string) error {
	return p.c.call(ctx, "browsingContext.navigate", map[string]any{
		"context": p.context, "url": url, "wait": "complete",
	}, nil)
}

// remoteValue is a serialized script value; only primitives are decoded.
type remoteValue struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// callFunction calls the JavaScript function fn in the page with string arguments,
// awaits its promise, and returns its result. A thrown exception is an error.
func (p *bidiPage) callFunction(ctx context.Context, fn string, args ...string) (remoteValue, error) {
	argv := make([]map[string]string, len(args))
	for i, a := range args {
		argv[i] = map[string]string{"type": "string", "value": a}
	}
	var res struct {
		Type             string      `json:"type"`
		Result           remoteValue `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := p.c.call(ctx, "script.callFunction", map[string]any{
		"functionDeclaration": fn,
		"arguments":           argv,
		"target":              map[string]string{"context": p.context},
		"awaitPromise":        true,
	}, &res)
	if err != nil {
		return remoteValue{}, err
	}
	if res.Type == "exception" {
		return remoteValue{}, fmt.Errorf("script threw: %s", res.ExceptionDetails.Text)
	}
	return res.Result, nil
}

// callString is callFunction for a function that returns a string.
func (p *bidiPage) callString(ctx context.Context, fn string, args ...string) (string, error) {
	v, err := p.callFunction(ctx, fn, args...)
	if err != nil {
		return "", err
	}
	var s string
	if v.Type != "string" || json.Unmarshal(v.Value, &s) != nil {
		return "", fmt.Errorf("script returned %s %s, want a string", v.Type, v.Value)
	}
	return s, nil
}

// screenshot captures the whole document as PNG.
func (p *bidiPage) screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data []byte `json:"data"` // base64 in JSON, decoded by encoding/json
	}
	err := p.c.call(ctx, "browsingContext.captureScreenshot", map[string]any{
		"context": p.context, "origin": "document",
	}, &res)
	return res.Data, err
}

// TestBiDiClient checks the client against a fake BiDi server: events are skipped,
// results are decoded, errors carry the server's message, and a dropped connection
// fails the call instead of hanging it.
func TestBiDiClient(t *testing.T) {
	srv := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) {
		for {
			var cmd struct {
				ID     int    `json:"id"`
				Method string `json:"method"`
			}
			if websocket.JSON.Receive(ws, &cmd) != nil {
				return
			}
			switch cmd.Method {
			case "echo.ok":
				_ = websocket.Message.Send(ws, `{"type":"event","method":"log.entryAdded","params":{}}`)
				_ = websocket.Message.Send(ws, fmt.Sprintf(`{"type":"success","id":%d,"result":{"n":7}}`, cmd.ID))
			case "echo.fail":
				_ = websocket.Message.Send(ws, fmt.Sprintf(`{"type":"error","id":%d,"error":"unknown command","message":"nope"}`, cmd.ID))
			default: // hang up
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	c, err := dialBiDi("ws"+strings.TrimPrefix(srv.URL, "http"), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var res struct{ N int }
	if err := c.call(ctx, "echo.ok", nil, &res); err != nil || res.N != 7 {
		t.Errorf("echo.ok = %+v, %v; want n=7", res, err)
	}
	testutil.CheckErr(t, "echo.fail", c.call(ctx, "echo.fail", nil, nil), "unknown command: nope")
	if err := c.call(ctx, "hang.up", nil, nil); err == nil {
		t.Error("a call on a dropped connection succeeded")
	}
	if err := c.call(ctx, "echo.ok", nil, nil); err == nil {
		t.Error("a call after the connection dropped succeeded")
	}
}
