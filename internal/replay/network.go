package replay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/record"
)

// compareNetwork compares the replay's request sequence with the recorded
// one: every request answered from the bundle, in the recorded order, and
// none left unmade.
func compareNetwork(rec *har.Log, n *record.Network, xs []*har.Exchange) Component {
	c := Component{Name: "network", Compared: true, Match: true}
	if misses := n.Misses(); len(misses) > 0 {
		c.Match = false
		c.First = fmt.Sprintf("%d request(s) the recording cannot answer; the first: %v", len(misses), misses[0])
		return c
	}
	var got []string
	for _, x := range xs {
		// Answered, or held open for a client that left before the
		// response, as it had when recorded.
		if x.Response != nil || x.ClientClosed != nil {
			got = append(got, n.Key(&x.Request, rec.Dal.KeyHeaders))
		}
	}
	var want []string
	for _, e := range rec.Entries {
		if e.Dal.Error == "" {
			want = append(want, e.Dal.Key)
		}
	}
	if slices.Equal(want, got) {
		return c
	}
	// Causal, not total: requests on separate connections that reached
	// the proxy in another order are not drift when the replay made the
	// same requests (each answered from the bundle, so each got its
	// recorded answer); what the agent sent differing is.
	if counts(want) == counts(got) {
		return c
	}
	c.Match = false
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			e := entryWithKey(rec, want[i])
			c.First = fmt.Sprintf("request %d differs: the recording made %s %s here, and the replay did not make the same requests", i+1, e.Request.Method, e.Request.URL)
			return c
		}
	}
	if len(got) < len(want) {
		e := entryWithKey(rec, want[len(got)])
		c.First = fmt.Sprintf("recorded request %d (%s %s) was not made in the replay", len(got)+1, e.Request.Method, e.Request.URL)
		return c
	}
	c.First = fmt.Sprintf("the replay made %d request(s) more than the recording", len(got)-len(want))
	return c
}

// counts is keys as a multiset, in a comparable form.
func counts(keys []string) string {
	s := slices.Clone(keys)
	slices.Sort(s)
	return strings.Join(s, "\x00")
}

// entryWithKey is rec's first entry of match key k.
func entryWithKey(rec *har.Log, k string) har.Entry {
	for _, e := range rec.Entries {
		if e.Dal.Key == k {
			return e
		}
	}
	return har.Entry{}
}

// comparePrompts compares the LLM calls extracted from the replay with the
// recorded prompts/.
func comparePrompts(b *bundle.Bundle, n *record.Network, xs []*har.Exchange) Component {
	c := Component{Name: "prompts", Compared: b.Has("prompts/0001.json"), Match: true}
	if !c.Compared {
		return c
	}
	es, err := n.Entries(xs)
	if err != nil {
		c.Match, c.First = false, err.Error()
		return c
	}
	got := record.ExtractPrompts(es)
	want, err := prompts.ReadDir(b.File("prompts"))
	if err != nil {
		c.Match, c.First = false, err.Error()
		return c
	}
	if d := prompts.Diff(want, got); d != "" && !prompts.SameSet(want, got) {
		c.Match, c.First = false, d
	}
	return c
}
