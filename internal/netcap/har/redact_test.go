package har

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every secret below must be absent from the written HAR.
var secrets = map[string]string{
	"authorization": "sk-ant-api03-AUTHORIZATION-0001",
	"x-api-key":     "sk-XAPIKEY-0002-abcdef",
	"query key":     "AIzaQUERYKEY0003xyz",
	"query token":   "ya29.QUERYTOKEN0004",
	"json api_key":  "sk-JSONAPIKEY-0005",
	"json nested":   "NESTEDCLIENTSECRET0006",
	"json number":   "12345678901234",
	"cookie":        "COOKIESESSION0007",
	"set-cookie":    "SETCOOKIESESSION0008",
	"sse token":     "SSETOKENSPLIT0009xyz",
	"location":      "LOCATIONTOKEN0010",
	"userinfo":      "USERINFOPASS0011",
	"form":          "FORMPASSWORD0012",
	"extra header":  "EXTRAHEADER0013",
	"extra field":   "EXTRAFIELD0014",
	"goog":          "GOOGAPIKEY0015",
}

func secretExchange(t *testing.T, coding string) *Exchange {
	t.Helper()
	s := secrets
	req := jsonReq("POST",
		"https://bob:"+s["userinfo"]+"@api.example.com/v1/chat?key="+s["query key"]+"&access_token="+s["query token"]+"&model=x",
		`{"model":"m","api_key":"`+s["json api_key"]+`","auth":{"client_secret":"`+s["json nested"]+`"},"password":`+s["json number"]+
			`,"session_id":"`+s["extra field"]+`","messages":[{"role":"user","content":"max_tokens stays"}],"max_tokens":5}`,
		"Authorization", "Bearer "+s["authorization"],
		"X-Api-Key", s["x-api-key"],
		"X-Goog-Api-Key", s["goog"],
		"X-Custom-Auth", s["extra header"],
		"Cookie", "sid="+s["cookie"],
		"X-Trace", "echo "+s["x-api-key"])
	events := []string{
		`data: {"type":"delta","text":"hi"}` + "\n\n",
		`data: {"type":"auth","token":"` + s["sse token"] + `","echo":"Bearer ` + s["authorization"] + `"}` + "\n\n",
		"data: [DONE]\n\n",
	}
	body := strings.Join(events, "")
	// Split the middle event inside the token, and the echoed key.
	cut1 := strings.Index(body, s["sse token"]) + 5
	cut2 := strings.Index(body, s["authorization"]) + 3
	pieces := [][]byte{[]byte(body[:cut1]), []byte(body[cut1:cut2]), []byte(body[cut2:])}
	resp := okResp("text/event-stream", "",
		"Set-Cookie", "sid="+s["set-cookie"]+"; Path=/; HttpOnly",
		"Location", "https://app.example.com/cb?access_token="+s["location"]+"&state=1",
		"X-Echo", s["x-api-key"])
	if coding != "" {
		pieces = compress(t, coding, pieces...)
		resp.Header.Set("Content-Encoding", coding)
	}
	resp.Streamed = true
	for i, p := range pieces {
		resp.Chunks = append(resp.Chunks, Chunk{At: time.Duration(i) * time.Millisecond, Data: p})
		resp.Body = append(resp.Body, p...)
	}
	x := exchange(0, req, resp)
	x.Error = "" // set below for the error path
	return x
}

func TestRedactionEveryPath(t *testing.T) {
	t.Parallel()
	r := NewRedactor([]string{"X-Custom-Auth"}, []string{"Session-ID"})
	for _, coding := range []string{"", "gzip", "br"} {
		t.Run("coding="+coding, func(t *testing.T) {
			t.Parallel()
			x := secretExchange(t, coding)
			e := mustEntry(t, x, r)

			failed := exchange(1, x.Request, nil)
			failed.Error = "Post \"https://api.example.com/v1/chat?key=" + secrets["query key"] + "\": EOF"
			ef := mustEntry(t, failed, r)

			form := exchange(2, Request{Method: "POST", URL: "https://auth.example.com/token",
				Header: hdr("Content-Type", "application/x-www-form-urlencoded"),
				Body:   []byte("grant_type=password&username=bob&password=" + secrets["form"])},
				okResp("application/json", `{"access_token":"`+secrets["location"]+`","expires_in":3600}`))
			eform := mustEntry(t, form, r)

			doc := writeHAR(t, e, ef, eform)
			validate(t, doc)
			for what, s := range secrets {
				if bytes.Contains(doc, []byte(s)) {
					t.Errorf("the %s secret %q is in the written HAR", what, s)
				}
				if bytes.Contains(doc, []byte(base64.StdEncoding.EncodeToString([]byte(s)))) {
					t.Errorf("the %s secret is in the written HAR in base64", what)
				}
			}
			for _, keep := range []string{"max_tokens stays", `\"max_tokens\":5`, "username=bob", `"expires_in":3600`, "state=1", "Path=/; HttpOnly"} {
				if !bytes.Contains(doc, []byte(keep)) && !bytes.Contains(doc, []byte(strings.ReplaceAll(keep, `"`, `\"`))) {
					t.Errorf("%q was redacted or lost", keep)
				}
			}
			wantPlaces := []string{
				"request.body.$.api_key", "request.body.$.auth.client_secret", "request.body.$.password",
				"request.body.$.session_id", "request.header.authorization", "request.header.cookie",
				"request.header.x-api-key", "request.header.x-custom-auth", "request.header.x-goog-api-key",
				"request.header.x-trace", "request.query.access_token", "request.query.key", "request.url.userinfo",
				"response.body", "response.body.$.token", "response.header.location.query.access_token",
				"response.header.set-cookie", "response.header.x-echo",
			}
			if !slices.Equal(e.Dal.Redactions, wantPlaces) {
				t.Errorf("redactions\n%q\nwant\n%q", e.Dal.Redactions, wantPlaces)
			}
			if !slices.Contains(ef.Dal.Redactions, "error") {
				t.Errorf("the error's echoed key is not recorded: %q", ef.Dal.Redactions)
			}
			if !slices.Equal(eform.Dal.Redactions, []string{"request.body.password", "response.body.$.access_token"}) {
				t.Errorf("form redactions %q", eform.Dal.Redactions)
			}
			if p := eform.Request.PostData.Params; len(p) != 3 || p[2].Value != Redacted || p[1].Value != "bob" {
				t.Errorf("form params %+v", p)
			}

			// The redacted pieces still join to the stored body, and the
			// replacement of a secret split by a boundary stays with the
			// piece where it started.
			var joined strings.Builder
			for _, c := range e.Dal.Chunks {
				joined.WriteString(c.Text)
			}
			if joined.String() != e.Response.Content.Text {
				t.Errorf("chunks join to %q, content is %q", joined.String(), e.Response.Content.Text)
			}
			if len(e.Dal.Chunks) != 3 || !strings.HasSuffix(e.Dal.Chunks[0].Text, `"token":"`+Redacted+`"`) {
				t.Errorf("chunks %+v", e.Dal.Chunks)
			}
		})
	}
}

// Replay serves Set-Cookie as stored, redacted.
func TestReplaySetCookieRedacted(t *testing.T) {
	t.Parallel()
	x := secretExchange(t, "")
	l := NewLog(nil, "test")
	l.Entries = []Entry{mustEntry(t, x, nil)}
	req := x.Request
	req.Header = req.Header.Clone()
	req.Header.Set("Authorization", "Bearer another-key-at-replay")
	s, err := NewIndex(l, nil, nil).Next(&req)
	if err != nil {
		t.Fatalf("a replay with another API key does not match: %v", err)
	}
	if got := s.Header.Get("Set-Cookie"); got != "sid=[REDACTED]; Path=/; HttpOnly" {
		t.Errorf("served Set-Cookie %q", got)
	}
}

func TestCredentialNames(t *testing.T) {
	t.Parallel()
	r := NewRedactor(nil, []string{"My-Field"})
	for _, tc := range []struct {
		name         string
		field, query bool
	}{
		{"api_key", true, true}, {"API-Key", true, true}, {"apikey", true, true}, {"access_token", true, true},
		{"client_secret", true, true}, {"password", true, true}, {"openai_api_key", true, true},
		{"next_page_token", true, true}, {"aws_secret_key", true, true}, {"my_field", true, true},
		{"key", false, true}, {"max_tokens", false, false}, {"input_tokens", false, false},
		{"tokens", false, false}, {"keyword", false, false}, {"model", false, false}, {"idempotency_key", false, false},
	} {
		if got := r.field(tc.name); got != tc.field {
			t.Errorf("field(%q) = %v, want %v", tc.name, got, tc.field)
		}
		if got := r.queryField(tc.name); got != tc.query {
			t.Errorf("queryField(%q) = %v, want %v", tc.name, got, tc.query)
		}
	}
	for h, want := range map[string]bool{"Authorization": true, "x-amz-security-token": true, "X-Goog-Api-Key": true,
		"anthropic-version": false, "openai-organization": false, "content-type": false, "x-request-id": false} {
		if got := r.header(h); got != want {
			t.Errorf("header(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestScanCredentialsTolerant(t *testing.T) {
	t.Parallel()
	cred := func(s string) bool { return s == "token" }
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`{"token":"a","x":{"token":{"deep":1}},"arr":[{"token":2}]}`, []string{`$.token="a"`, `$.x.token={"deep":1}`, `$.arr[0].token=2`}},
		{`{"a":"say \"token\": \"x\"","token":"b"}`, []string{`$.token="b"`}},
		{`{"token":"a","b":"trunc`, []string{`$.token="a"`}},
		{`{"weird key":{"token":"z"}}`, []string{`$["weird key"].token="z"`}},
		{`not json`, nil},
		{strings.Repeat("[", 10000), nil},
	} {
		var got []string
		for _, s := range scanCredentials([]byte(tc.in), cred) {
			got = append(got, s.path+"="+tc.in[s.start:s.end])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("scan %.40q = %q, want %q", tc.in, got, tc.want)
		}
	}
}
