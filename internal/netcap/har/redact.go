package har

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
)

// Redactor decides which values are credentials and replaces them. It is
// immutable and safe for concurrent use.
type Redactor struct {
	headers map[string]bool // lower-case header names
	fields  map[string]bool // normalized field names
	values  [][]byte        // secret values masked in match keys, longest first
}

// WithValues returns a copy of r that also masks these secret values (a
// kept secret's value when recording, its placeholder when replaying)
// wherever they occur in a request's match key material — URL, headers,
// body — so the key holds no hash of a secret and a replay whose agent
// got a placeholder computes the same key. Values shorter than 4 bytes are
// ignored (they would match too much).
func (r *Redactor) WithValues(values ...string) *Redactor {
	c := *r
	c.values = nil
	for _, v := range values {
		if len(v) >= 4 {
			c.values = append(c.values, []byte(v))
		}
	}
	slices.SortFunc(c.values, func(a, b []byte) int { return len(b) - len(a) })
	return &c
}

// maskValues replaces the secret values in b by [REDACTED].
func (r *Redactor) maskValues(b []byte) []byte {
	for _, v := range r.values {
		if bytes.Contains(b, v) {
			b = bytes.ReplaceAll(b, v, []byte("[REDACTED]"))
		}
	}
	return b
}

// The default credential headers, lower-case. Header names that are
// credential field names (x-api-key, x-amz-security-token) count too.
var defaultHeaders = []string{
	"authorization", "proxy-authorization", "x-api-key", "api-key", "x-auth-token",
	"x-goog-api-key", "cookie", "set-cookie",
}

// The default credential field names, normalized (lower-case, '-' as '_').
var defaultFields = []string{
	"api_key", "apikey", "access_token", "refresh_token", "id_token", "auth_token",
	"session_token", "token", "secret", "client_secret", "password", "passwd",
	"private_key", "secret_access_key",
}

// Suffixes of credential field names.
var fieldSuffixes = []string{
	"_token", "_secret", "_api_key", "_apikey", "_password", "_secret_key", "_private_key",
}

// Only in query strings: ?key= is how Google APIs take an API key.
var queryOnlyFields = []string{"key"}

// minEcho is the shortest credential value replaced wherever it appears
// verbatim; shorter ones ("1", "true") would damage unrelated text.
const minEcho = 8

var defaultRedactor = NewRedactor(nil, nil)

// NewRedactor returns a Redactor for the default credentials (see the
// package documentation) plus extraHeaders (header names) and extraFields
// (query, JSON and form field names), both case-insensitive.
func NewRedactor(extraHeaders, extraFields []string) *Redactor {
	r := &Redactor{headers: map[string]bool{}, fields: map[string]bool{}}
	for _, h := range slices.Concat(defaultHeaders, extraHeaders) {
		r.headers[strings.ToLower(strings.TrimSpace(h))] = true
	}
	for _, f := range slices.Concat(defaultFields, extraFields) {
		r.fields[normField(f)] = true
	}
	return r
}

func normField(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
}

// field reports whether a JSON or form field name is a credential.
func (r *Redactor) field(name string) bool {
	n := normField(name)
	if r.fields[n] {
		return true
	}
	for _, s := range fieldSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// queryField reports whether a query parameter name is a credential.
func (r *Redactor) queryField(name string) bool {
	return r.field(name) || slices.Contains(queryOnlyFields, normField(name))
}

// header reports whether a header's value is a credential.
func (r *Redactor) header(name string) bool {
	n := strings.ToLower(name)
	return r.headers[n] || r.field(n)
}

// redaction collects what was redacted in one entry: the places, and the
// credential values, to be replaced wherever else they appear.
type redaction struct {
	places  []string
	secrets []string
}

func (rd *redaction) place(p string) { rd.places = append(rd.places, p) }

func (rd *redaction) secret(v string) {
	v = strings.TrimSpace(v)
	if len(v) >= minEcho && v != Redacted {
		rd.secrets = append(rd.secrets, v)
	}
}

// finish sorts the secrets longest first (so a token inside a longer
// header value is not replaced before the value) and the places.
func (rd *redaction) finish() {
	slices.SortFunc(rd.secrets, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	rd.secrets = slices.Compact(rd.secrets)
}

func (rd *redaction) sortedPlaces() []string {
	p := slices.Clone(rd.places)
	slices.Sort(p)
	return slices.Compact(p)
}

// echo replaces the collected secrets in s, recording place when it did.
func (rd *redaction) echo(s, place string) string {
	out := s
	for _, sec := range rd.secrets {
		out = strings.ReplaceAll(out, sec, Redacted)
	}
	if out != s && place != "" {
		rd.place(place)
	}
	return out
}

// headerValue redacts one credential header value and collects its
// secrets.
func (r *Redactor) headerValue(name, v string, rd *redaction) string {
	switch strings.ToLower(name) {
	case "cookie":
		parts := strings.Split(v, ";")
		for i, p := range parts {
			n, val, ok := strings.Cut(p, "=")
			if ok {
				rd.secret(val)
				parts[i] = n + "=" + Redacted
			}
		}
		return strings.Join(parts, ";")
	case "set-cookie":
		first, attrs, hasAttrs := strings.Cut(v, ";")
		n, val, ok := strings.Cut(first, "=")
		if !ok {
			return v
		}
		rd.secret(val)
		out := n + "=" + Redacted
		if hasAttrs {
			out += ";" + attrs
		}
		return out
	}
	rd.secret(v)
	if _, tok, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
		rd.secret(tok) // "Bearer <token>", "Basic <credentials>"
	}
	return Redacted
}

// redactURL redacts the user-info password and credential query values
// of a raw URL, keeping everything else byte for byte. where is the
// place prefix ("request").
func (r *Redactor) redactURL(raw, where string, rd *redaction) string {
	rest, frag, hasFrag := strings.Cut(raw, "#")
	base, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.Index(base, "://"); i >= 0 {
		auth := base[i+3:]
		path := ""
		if j := strings.IndexByte(auth, '/'); j >= 0 {
			auth, path = auth[:j], auth[j:]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			if user, pass, ok := strings.Cut(auth[:at], ":"); ok {
				if p, err := url.PathUnescape(pass); err == nil {
					rd.secret(p)
				}
				rd.secret(pass)
				auth = user + ":" + Redacted + auth[at:]
				rd.place(where + ".url.userinfo")
			}
		}
		base = base[:i+3] + auth + path
	}
	out := base
	if hasQuery {
		out += "?" + r.redactPairs(query, where+".query.", r.queryField, rd)
	}
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// redactPairs redacts the credential values of a&b=c pairs, in place.
func (r *Redactor) redactPairs(s, place string, cred func(string) bool, rd *redaction) string {
	pairs := strings.Split(s, "&")
	for i, p := range pairs {
		n, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		name := unescapeQuery(n)
		if cred(name) {
			rd.secret(unescapeQuery(v))
			rd.secret(v)
			pairs[i] = n + "=" + Redacted
			rd.place(place + strings.ToLower(name))
		}
	}
	return strings.Join(pairs, "&")
}

func unescapeQuery(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// edit replaces b[start:end] with repl.
type edit struct {
	start, end int
	repl       string
}

// bodyEdits finds the credentials in a decoded body: JSON fields (a JSON
// body, or the data lines of an event stream), form fields. place is
// "request.body" or "response.body".
func (r *Redactor) bodyEdits(body []byte, mime, place string, rd *redaction) []edit {
	if !isUTF8(body) {
		return nil
	}
	m := strings.ToLower(mime)
	var edits []edit
	addJSON := func(b []byte, off int) {
		for _, s := range scanCredentials(b, r.field) {
			edits = append(edits, edit{off + s.start, off + s.end, `"` + Redacted + `"`})
			rd.place(place + "." + s.path)
			collectJSONSecret(b[s.start:s.end], rd)
		}
	}
	switch {
	case strings.Contains(m, "text/event-stream"):
		off := 0
		for line := range bytes.SplitAfterSeq(body, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				addJSON(data, off+len("data:"))
			}
			off += len(line)
		}
	case strings.Contains(m, "application/x-www-form-urlencoded"):
		off := 0
		for p := range strings.SplitAfterSeq(string(body), "&") {
			pair := strings.TrimSuffix(p, "&")
			if n, v, ok := strings.Cut(pair, "="); ok && r.field(unescapeQuery(n)) {
				start := off + len(n) + 1
				edits = append(edits, edit{start, start + len(v), Redacted})
				rd.secret(unescapeQuery(v))
				rd.secret(v)
				rd.place(place + "." + strings.ToLower(unescapeQuery(n)))
			}
			off += len(p)
		}
	default:
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); strings.Contains(m, "json") ||
			len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
			addJSON(body, 0)
		}
	}
	return edits
}

// collectJSONSecret collects the strings of a redacted JSON value.
func collectJSONSecret(v []byte, rd *redaction) {
	v = bytes.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' {
		if s, ok := unquoteJSON(v); ok {
			rd.secret(s)
		}
		return
	}
	if len(v) > 0 && v[0] != '{' && v[0] != '[' {
		rd.secret(string(v)) // a number
	}
}

// echoEdits finds the collected secrets verbatim in b.
func (rd *redaction) echoEdits(b []byte) []edit {
	var edits []edit
	for _, sec := range rd.secrets {
		s := []byte(sec)
		for i := 0; ; {
			j := bytes.Index(b[i:], s)
			if j < 0 {
				break
			}
			edits = append(edits, edit{i + j, i + j + len(s), Redacted})
			i += j + len(s)
		}
	}
	return edits
}

// applyEdits applies edits (in any order, possibly overlapping: an edit
// inside an earlier one is dropped, a partly overlapping one is widened
// into it) and returns the new bytes and the edits actually applied, in
// order.
func applyEdits(b []byte, edits []edit) ([]byte, []edit) {
	if len(edits) == 0 {
		return b, nil
	}
	slices.SortFunc(edits, func(x, y edit) int {
		if x.start != y.start {
			return x.start - y.start
		}
		return y.end - x.end
	})
	var merged []edit
	for _, e := range edits {
		if n := len(merged); n > 0 && e.start < merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, e.end)
			continue
		}
		merged = append(merged, e)
	}
	var out bytes.Buffer
	out.Grow(len(b))
	at := 0
	for _, e := range merged {
		out.Write(b[at:e.start])
		out.WriteString(e.repl)
		at = e.end
	}
	out.Write(b[at:])
	return out.Bytes(), merged
}

// mapOffset maps an offset of the original bytes to the edited bytes; an
// offset inside an edit maps to the end of its replacement, so the whole
// replacement stays with the piece where the secret started.
func mapOffset(o int, edits []edit) int {
	shift := 0
	for _, e := range edits {
		switch {
		case o <= e.start:
			return o + shift
		case o < e.end:
			return e.start + shift + len(e.repl)
		}
		shift += len(e.repl) - (e.end - e.start)
	}
	return o + shift
}
