package har

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
)

// Key is the match key of a raw request with the default [Redactor]; see
// [Redactor.Key].
func Key(req *Request, headers []string) string {
	return defaultRedactor.Key(req, headers)
}

// Key is the match key of a raw (unredacted) request: "METHOD URL
// sha256:HEX", where URL is the normalized URL without its query (which
// could hold anything) and HEX the SHA-256 of the canonical material:
// method, normalized URL with its sorted query, the headers named in
// headers (case-insensitive; their values as sent) and the canonical
// body. Credential values in the query and body, and the secret values
// given to WithValues anywhere, are masked in that material.
func (r *Redactor) Key(req *Request, headers []string) string {
	u := string(r.maskValues([]byte(r.normalURL(req.URL))))
	h := sha256.New()
	h.Write([]byte(req.Method))
	h.Write([]byte{'\n'})
	h.Write([]byte(u))
	h.Write([]byte{'\n'})
	if len(headers) > 0 {
		names := make([]string, len(headers))
		for i, n := range headers {
			names[i] = strings.ToLower(strings.TrimSpace(n))
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			h.Write([]byte(n))
			h.Write([]byte{':'})
			for _, v := range req.Header.Values(n) {
				h.Write(r.maskValues([]byte(v)))
				h.Write([]byte{'\n'})
			}
			h.Write([]byte{0})
		}
	}
	h.Write([]byte{'\n'})
	h.Write(r.canonicalBody(req.Header.Get("Content-Type"), r.maskValues(bytes.Clone(requestBody(req)))))
	var sum [sha256.Size]byte
	readable, _, _ := strings.Cut(u, "?")
	return printable(req.Method) + " " + printable(readable) + " sha256:" + hex.EncodeToString(h.Sum(sum[:0]))
}

// printable escapes as %XX the bytes of s that are not printable ASCII
// (space included), so that a key's readable part survives JSON and
// splits on spaces.
func printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// requestBody is a request's body without its Content-Encoding (as sent
// when that cannot be removed).
func requestBody(req *Request) []byte {
	if cs := codings(req.Header); len(cs) > 0 {
		if b, err := decodeBody(req.Body, cs); err == nil {
			return b
		}
	}
	return req.Body
}

// normalURL is raw with scheme and host lower-case, the default port
// dropped, an empty path as "/", query parameters decoded, credential
// values redacted, sorted and re-encoded, and no fragment or user info.
// A URL that does not parse is kept as is, without query credentials.
func (r *Redactor) normalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		rd := &redaction{}
		return r.redactURL(raw, "", rd)
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && !(scheme == "http" && p == "80" || scheme == "https" && p == "443") {
		host += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	out := scheme + "://" + host + path
	if u.RawQuery != "" {
		out += "?" + r.canonicalPairs(u.RawQuery, r.queryField)
	}
	return out
}

type pair struct{ name, value string }

// canonicalPairs decodes a&b=c pairs, masks credential values, sorts them
// by name then value and re-encodes them.
func (r *Redactor) canonicalPairs(s string, cred func(string) bool) string {
	var ps []pair
	for p := range strings.SplitSeq(s, "&") {
		if p == "" {
			continue
		}
		n, v, _ := strings.Cut(p, "=")
		p := pair{unescapeQuery(n), unescapeQuery(v)}
		if cred(p.name) {
			p.value = Redacted
		}
		ps = append(ps, p)
	}
	slices.SortStableFunc(ps, func(a, b pair) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(escapeQuery(p.name))
		b.WriteByte('=')
		b.WriteString(escapeQuery(p.value))
	}
	return b.String()
}

// escapeQuery escapes like url.QueryEscape but leaves the brackets of
// [REDACTED] readable.
func escapeQuery(s string) string {
	if s == Redacted {
		return s
	}
	return url.QueryEscape(s)
}

// canonicalBody is a body's matching form: JSON re-encoded with sorted
// keys and no insignificant space, a form body's pairs sorted, both with
// credential values masked; other bodies as they are.
func (r *Redactor) canonicalBody(contentType string, body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	ct := strings.ToLower(contentType)
	switch {
	case strings.Contains(ct, "application/x-www-form-urlencoded"):
		return []byte(r.canonicalPairs(string(body), r.field))
	case strings.Contains(ct, "json") || ct == "" && looksJSON(body):
		if c, ok := r.canonicalJSON(body); ok {
			return c
		}
	}
	return body
}

func looksJSON(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// canonicalJSON re-encodes a JSON text with sorted keys, no space, and
// credential members' values masked; false when b is not one JSON value.
func (r *Redactor) canonicalJSON(b []byte) ([]byte, bool) {
	v, ok := parseJSON(b)
	if !ok {
		return nil, false
	}
	v = r.maskJSON(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), true
}

// parseJSON decodes exactly one JSON value, numbers as json.Number.
func parseJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	return v, true
}

func (r *Redactor) maskJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if r.field(k) {
				t[k] = Redacted
			} else {
				t[k] = r.maskJSON(sub)
			}
		}
	case []any:
		for i, sub := range t {
			t[i] = r.maskJSON(sub)
		}
	}
	return v
}
