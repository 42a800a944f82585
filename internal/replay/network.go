package replay

import (
	"fmt"

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
	for i, e := range rec.Entries {
		if e.Dal.Error != "" {
			continue
		}
		if len(got) == 0 {
			c.Match = false
			c.First = fmt.Sprintf("recorded request %d (%s %s) was not made in the replay", i+1, e.Request.Method, e.Request.URL)
			return c
		}
		if got[0] != e.Dal.Key {
			c.Match = false
			c.First = fmt.Sprintf("request %d differs in order: the recording made %s %s here", i+1, e.Request.Method, e.Request.URL)
			return c
		}
		got = got[1:]
	}
	if len(got) > 0 {
		c.Match = false
		c.First = fmt.Sprintf("the replay made %d request(s) more than the recording", len(got))
	}
	return c
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
	if d := prompts.Diff(want, got); d != "" {
		c.Match, c.First = false, d
	}
	return c
}
