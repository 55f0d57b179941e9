package ca

import "testing"

// A removed pod's token stops working; other pods' tokens keep working.
func TestTokensRevokePod(t *testing.T) {
	tokens := NewTokens()
	a, err := tokens.Issue(Caller{Pod: "httpbin-1", Identity: Identity{Namespace: "default", ServiceAccount: "httpbin"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tokens.Issue(Caller{Pod: "curl-1", Identity: Identity{Namespace: "default", ServiceAccount: "curl"}})
	if err != nil {
		t.Fatal(err)
	}
	tokens.RevokePod("httpbin-1")
	if _, ok := tokens.Lookup(a); ok {
		t.Error("the removed pod's token still works")
	}
	if c, ok := tokens.Lookup(b); !ok || c.Pod != "curl-1" {
		t.Errorf("another pod's token: %+v, %v", c, ok)
	}
}
