package prompts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// ReadDir reads the prompts [Write] wrote into dir, in file order.
func ReadDir(dir string) ([]*Prompt, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read prompts: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := strings.TrimSuffix(e.Name(), ".json")
		if _, err := strconv.Atoi(n); err == nil && !e.IsDir() && n != e.Name() {
			names = append(names, e.Name())
		}
	}
	// 10000.json comes after 9999.json.
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	out := make([]*Prompt, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("read prompts: %w", err)
		}
		var p Prompt
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("prompts/%s is not a prompt: %v", n, err)
		}
		out = append(out, &p)
	}
	return out, nil
}

// fieldOrder is the order the differences of two prompts are looked for
// in: a prompt's JSON fields but seq, which counts every exchange and
// shifts with any other request.
var fieldOrder = []string{"provider", "api", "url", "status", "model", "parameters", "system", "messages",
	"stream", "response", "usage", "system_fingerprint", "chunks"}

// Diff compares recorded prompts (want) with a replay's (got), call by
// call, and describes the first difference in one sentence, as
// "prompts/0002.json differs at $.messages[1].content: recorded "hi",
// replayed "hello""; "" when they are the same. Seq is not compared.
func Diff(want, got []*Prompt) string {
	for i := range min(len(want), len(got)) {
		w, g := tree(want[i]), tree(got[i])
		for _, f := range fieldOrder {
			if d := firstDiff(only(w, f), only(g, f)); d != "" {
				return fmt.Sprintf("prompts/%04d.json differs at %s", i+1, d)
			}
		}
	}
	if len(want) != len(got) {
		return fmt.Sprintf("the replay made %d LLM call(s), the recording %d", len(got), len(want))
	}
	return ""
}

// SameSet reports whether want and got hold the same calls in another
// order: concurrent calls that reached the proxy in another order, each
// answered alike.
func SameSet(want, got []*Prompt) bool {
	if len(want) != len(got) {
		return false
	}
	enc := func(ps []*Prompt) []string {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			q := *p
			q.Seq = 0 // its place, which is what may differ
			b, _ := json.Marshal(&q)
			out = append(out, string(b))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(enc(want), enc(got))
}

// tree is a prompt's JSON as generic values.
func tree(p *Prompt) map[string]any {
	b, err := json.Marshal(p)
	if err != nil {
		return map[string]any{}
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return map[string]any{}
	}
	return m
}

// firstDiff describes the first difference between two JSON documents,
// "" when equal.
func firstDiff(w, g map[string]any) string {
	d := har.DiffJSON("$", w, g, 1)
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: recorded %s, replayed %s", d[0].Path, d[0].Recorded, d[0].Got)
}

// only is the member k of m alone (an empty object when m lacks it).
func only(m map[string]any, k string) map[string]any {
	if v, ok := m[k]; ok {
		return map[string]any{k: v}
	}
	return map[string]any{}
}
