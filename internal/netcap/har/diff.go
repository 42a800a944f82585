package har

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDiffs bounds the differences computed between two requests.
const maxDiffs = 50

// maxShown is how much of a value a difference shows.
const maxShown = 40

// diffRequests names the fields in which two redacted requests differ:
// "method", "url host", "url path", "query NAME", "header NAME", "body
// $.path" (JSON), "body NAME" (form), "body" (other bodies), each with the
// recorded and the live value, truncated.
func (r *Redactor) diffRequests(rec, got *EntryRequest, keyHeaders []string) []string {
	var d differ
	if rec.Method != got.Method {
		d.add("method", quote(rec.Method), quote(got.Method))
	}
	ru, gu := parseNormal(r, rec.URL), parseNormal(r, got.URL)
	if ru.Scheme != gu.Scheme {
		d.add("url scheme", quote(ru.Scheme), quote(gu.Scheme))
	}
	if ru.Host != gu.Host {
		d.add("url host", quote(ru.Host), quote(gu.Host))
	}
	if ru.EscapedPath() != gu.EscapedPath() {
		d.add("url path", quote(ru.EscapedPath()), quote(gu.EscapedPath()))
	}
	d.multi("query ", nvMap(rec.QueryString), nvMap(got.QueryString))
	if len(keyHeaders) > 0 {
		rh, gh := map[string][]string{}, map[string][]string{}
		for _, n := range keyHeaders {
			n = strings.ToLower(n)
			rh[n], gh[n] = headerValues(rec.Headers, n), headerValues(got.Headers, n)
		}
		d.multi("header ", rh, gh)
	}
	d.body(rec, got)
	return d.out
}

type differ struct{ out []string }

func (d *differ) add(what, rec, got string) {
	if len(d.out) < maxDiffs {
		d.out = append(d.out, what+": recorded "+rec+", got "+got)
	}
}

// multi compares name → values maps.
func (d *differ) multi(prefix string, rec, got map[string][]string) {
	names := make([]string, 0, len(rec)+len(got))
	for n := range rec {
		names = append(names, n)
	}
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		rv, gv := rec[n], got[n]
		if !slices.Equal(rv, gv) {
			d.add(prefix+n, values(rv), values(gv))
		}
	}
}

func values(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = quote(v)
	}
	return strings.Join(q, ", ")
}

func (d *differ) body(rec, got *EntryRequest) {
	rb, rerr := bodyOf(rec)
	gb, gerr := bodyOf(got)
	if rerr != nil || gerr != nil {
		d.add("body", "an undecodable body", "a body")
		return
	}
	if bytes.Equal(rb, gb) {
		return
	}
	rct, gct := mimeOf(rec), mimeOf(got)
	if isForm(rct) && isForm(gct) {
		d.multi("body ", formMap(rb), formMap(gb))
		return
	}
	if (strings.Contains(rct, "json") || looksJSON(rb)) && (strings.Contains(gct, "json") || looksJSON(gb)) {
		rv, rok := parseJSON(rb)
		gv, gok := parseJSON(gb)
		if rok && gok {
			d.json("$", rv, gv)
			return
		}
	}
	at := 0
	for at < len(rb) && at < len(gb) && rb[at] == gb[at] {
		at++
	}
	d.add("body", fmt.Sprintf("%d bytes", len(rb)), fmt.Sprintf("%d bytes, first difference at byte %d", len(gb), at))
}

func (d *differ) json(path string, rec, got any) {
	for _, x := range DiffJSON(path, rec, got, maxDiffs-len(d.out)) {
		d.add("body "+x.Path, x.Recorded, x.Got)
	}
}

// JSONDiff is one difference between two JSON documents: the path of the
// member or element, and each side's value as JSON, truncated ("none" for
// a side that does not have it).
type JSONDiff struct{ Path, Recorded, Got string }

// DiffJSON walks two decoded JSON values (objects' members in name order)
// from path ("$") and returns their first differences, at most max.
func DiffJSON(path string, rec, got any, max int) []JSONDiff {
	var out []JSONDiff
	diffJSON(path, rec, got, max, &out)
	return out
}

func diffJSON(path string, rec, got any, limit int, out *[]JSONDiff) {
	if len(*out) >= limit {
		return
	}
	add := func(p, r, g string) {
		if len(*out) < limit {
			*out = append(*out, JSONDiff{Path: p, Recorded: r, Got: g})
		}
	}
	switch rv := rec.(type) {
	case map[string]any:
		if gv, ok := got.(map[string]any); ok {
			keys := make([]string, 0, len(rv)+len(gv))
			for k := range rv {
				keys = append(keys, k)
			}
			for k := range gv {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range slices.Compact(keys) {
				p := memberPath(path, k)
				r, rok := rv[k]
				g, gok := gv[k]
				switch {
				case !rok:
					add(p, "none", shown(g))
				case !gok:
					add(p, shown(r), "none")
				default:
					diffJSON(p, r, g, limit, out)
				}
			}
			return
		}
	case []any:
		if gv, ok := got.([]any); ok {
			for i := range max(len(rv), len(gv)) {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i >= len(rv):
					add(p, "none", shown(gv[i]))
				case i >= len(gv):
					add(p, shown(rv[i]), "none")
				default:
					diffJSON(p, rv[i], gv[i], limit, out)
				}
			}
			return
		}
	}
	if r, g := shownFull(rec), shownFull(got); r != g {
		r, g = window(r, g)
		add(path, r, g)
	}
}

// window shortens two differing values to maxShown runes each around
// where they first differ, marking the cuts: two long prompts that share
// their first lines show the bytes that differ, not the same prefix twice.
func window(r, g string) (string, string) {
	rr, gr := []rune(r), []rune(g)
	i := 0
	for i < len(rr) && i < len(gr) && rr[i] == gr[i] {
		i++
	}
	from := max(0, i-maxShown/4)
	cut := func(v []rune) string {
		if from == 0 {
			return truncate(string(v))
		}
		return "…" + truncate(string(v[min(from, len(v)):]))
	}
	return cut(rr), cut(gr)
}

func shownFull(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func shown(v any) string { return truncate(shownFull(v)) }

func quote(s string) string { return truncate(strconv.Quote(s)) }

// truncate shortens s to maxShown runes, marking the cut.
func truncate(s string) string {
	if utf8.RuneCountInString(s) <= maxShown {
		return s
	}
	r := []rune(s)
	return string(r[:maxShown]) + "…"
}

func bodyOf(req *EntryRequest) ([]byte, error) {
	if req.PostData == nil {
		return nil, nil
	}
	return req.PostData.Bytes()
}

func mimeOf(req *EntryRequest) string {
	if req.PostData == nil {
		return ""
	}
	return strings.ToLower(req.PostData.MimeType)
}

func isForm(ct string) bool { return strings.Contains(ct, "application/x-www-form-urlencoded") }

func formMap(b []byte) map[string][]string {
	m := map[string][]string{}
	for p := range strings.SplitSeq(string(b), "&") {
		if p == "" {
			continue
		}
		n, v, _ := strings.Cut(p, "=")
		m[unescapeQuery(n)] = append(m[unescapeQuery(n)], unescapeQuery(v))
	}
	return m
}

func nvMap(nvs []NameValue) map[string][]string {
	m := map[string][]string{}
	for _, nv := range nvs {
		m[nv.Name] = append(m[nv.Name], nv.Value)
	}
	return m
}

func headerValues(h []NameValue, lower string) []string {
	var out []string
	for _, nv := range h {
		if strings.ToLower(nv.Name) == lower {
			out = append(out, nv.Value)
		}
	}
	return out
}

// parseNormal parses a URL in its normalized form; a URL that does not
// parse yields an empty one with the text as its path.
func parseNormal(r *Redactor, raw string) *url.URL {
	if u, err := url.Parse(r.normalURL(raw)); err == nil {
		return u
	}
	return &url.URL{Path: raw}
}
