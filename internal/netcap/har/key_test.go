package har

import (
	"regexp"
	"strings"
	"testing"
)

func TestKeyStable(t *testing.T) {
	t.Parallel()
	base := jsonReq("POST", "https://api.example.com/v1/chat?b=2&a=1", `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`)
	same := []struct {
		name string
		req  Request
	}{
		{"key order and space", jsonReq("POST", "https://api.example.com/v1/chat?b=2&a=1", "{\n  \"temperature\": 0.5,\n  \"messages\": [ {\"content\":\"hi\", \"role\":\"user\"} ],\n  \"model\": \"m\"\n}\n")},
		{"query order", jsonReq("POST", "https://api.example.com/v1/chat?a=1&b=2", base.Header.Get("x")+string(base.Body))},
		{"host case, default port, fragment", jsonReq("POST", "HTTPS://API.Example.COM:443/v1/chat?a=1&b=2#frag", string(base.Body))},
		{"query escaping", jsonReq("POST", "https://api.example.com/v1/chat?a=%31&b=2", string(base.Body))},
		{"other headers", jsonReq("POST", "https://api.example.com/v1/chat?b=2&a=1", string(base.Body), "User-Agent", "x/2", "X-Request-Id", "123")},
		{"another credential", jsonReq("POST", "https://api.example.com/v1/chat?b=2&a=1", string(base.Body), "Authorization", "Bearer sk-other")},
	}
	want := Key(&base, nil)
	for _, tc := range same {
		if got := Key(&tc.req, nil); got != want {
			t.Errorf("%s: key %s, want %s", tc.name, got, want)
		}
	}
	different := []struct {
		name string
		req  Request
	}{
		{"method", jsonReq("PUT", base.URL, string(base.Body))},
		{"path", jsonReq("POST", "https://api.example.com/v1/chat2?b=2&a=1", string(base.Body))},
		{"query value", jsonReq("POST", "https://api.example.com/v1/chat?b=3&a=1", string(base.Body))},
		{"port", jsonReq("POST", "https://api.example.com:8443/v1/chat?b=2&a=1", string(base.Body))},
		{"scheme", jsonReq("POST", "http://api.example.com/v1/chat?b=2&a=1", string(base.Body))},
		{"body value", jsonReq("POST", base.URL, `{"model":"m","messages":[{"role":"user","content":"hi!"}],"temperature":0.5}`)},
		{"array order", jsonReq("POST", base.URL, `{"model":"m","messages":[],"temperature":0.5,"x":[2,1]}`)},
	}
	for _, tc := range different {
		if got := Key(&tc.req, nil); got == want {
			t.Errorf("%s: same key as the base request", tc.name)
		}
	}
}

func TestKeyMasksCredentials(t *testing.T) {
	t.Parallel()
	a := jsonReq("POST", "https://x.test/v1?key=AAAAAAAAAAAA", `{"api_key":"sk-aaaaaaaaaaaa","q":1}`)
	b := jsonReq("POST", "https://x.test/v1?key=BBBBBBBBBBBB", `{"q":1,"api_key":"sk-bbbbbbbbbbbb"}`)
	ka, kb := Key(&a, nil), Key(&b, nil)
	if ka != kb {
		t.Errorf("credentials change the key: %s vs %s", ka, kb)
	}
	if !regexp.MustCompile(`^POST https://x\.test/v1 sha256:[0-9a-f]{64}$`).MatchString(ka) {
		t.Errorf("key %q does not have the form METHOD URL sha256:HEX", ka)
	}
	if strings.Contains(ka, "AAAA") || strings.Contains(ka, "sk-") {
		t.Errorf("key %q shows a credential", ka)
	}
}

func TestKeyForms(t *testing.T) {
	t.Parallel()
	form := func(body string) Request {
		return Request{Method: "POST", URL: "https://x.test/f", Header: hdr("Content-Type", "application/x-www-form-urlencoded"), Body: []byte(body)}
	}
	a, b, c := form("b=2&a=1&a=0"), form("a=0&b=2&a=1"), form("a=1&b=2")
	if Key(&a, nil) != Key(&b, nil) {
		t.Errorf("form field order changes the key")
	}
	if Key(&a, nil) == Key(&c, nil) {
		t.Errorf("a missing form field does not change the key")
	}
	raw := func(body string) Request {
		return Request{Method: "POST", URL: "https://x.test/f", Header: hdr("Content-Type", "text/plain"), Body: []byte(body)}
	}
	x, y := raw(`{"a":1, "b":2}`), raw(`{"b":2,"a":1}`)
	if Key(&x, nil) == Key(&y, nil) {
		t.Errorf("a text/plain body is canonicalized as JSON")
	}
}

func TestKeyHeaders(t *testing.T) {
	t.Parallel()
	a := jsonReq("GET", "https://x.test/", "", "X-Tenant", "a")
	b := jsonReq("GET", "https://x.test/", "", "X-Tenant", "b")
	if Key(&a, nil) != Key(&b, nil) {
		t.Errorf("a header not allow-listed changes the key")
	}
	if Key(&a, []string{"x-tenant"}) == Key(&b, []string{"X-Tenant"}) {
		t.Errorf("an allow-listed header does not change the key")
	}
}
