package show

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/format/fsdiff"
	"github.com/dal-runtime/dal/internal/match"
)

// Compare pairs run a (of bundle ba) with run b (of bundle bb): the facts
// of each run, the timelines aligned request by request, the LLM calls in
// order with their messages compared, the file changes and the logs. The
// bundles are read for file contents and whole logs; they stay open.
func Compare(ba, bb *bundle.Bundle, a, b *View, lim Limits) *Comparison {
	c := &Comparison{Timeline: []Pair{}, LLM: []LLMPair{}, Files: []FilePair{}}
	c.Summary = summaryDiff(a, b)
	c.Timeline = alignTimelines(a, b)
	for i := range max(len(a.LLM), len(b.LLM)) {
		c.LLM = append(c.LLM, pairLLM(a, b, i))
	}
	c.Files = pairFiles(ba, bb, a, b, lim)
	for _, name := range []string{"stdout", "stderr"} {
		c.Logs = append(c.Logs, pairLog(ba, bb, name))
	}
	return c
}

func summaryDiff(a, b *View) []Difference {
	sa, sb := a.Summary, b.Summary
	row := func(name, x, y string) Difference { return Difference{Name: name, A: x, B: y, Same: x == y} }
	q := func(v []string) string { return fmt.Sprintf("%q", v) }
	n := strconv.Itoa
	return []Difference{
		row("command", q(sa.Command), q(sb.Command)),
		row("mode", sa.Mode, sb.Mode),
		row("seed", strconv.FormatUint(sa.Seed, 10), strconv.FormatUint(sb.Seed, 10)),
		row("epoch", sa.Epoch, sb.Epoch),
		row("exit code", n(sa.ExitCode), n(sb.ExitCode)),
		row("model", sa.Model, sb.Model),
		row("LLM calls", n(len(a.LLM)), n(len(b.LLM))),
		row("tokens in", strconv.FormatInt(sa.TokensIn, 10), strconv.FormatInt(sb.TokensIn, 10)),
		row("tokens out", strconv.FormatInt(sa.TokensOut, 10), strconv.FormatInt(sb.TokensOut, 10)),
		row("HTTP exchanges", n(len(a.HTTP)), n(len(b.HTTP))),
		row("file changes", n(len(a.Files)), n(len(b.Files))),
		row("duration", fmt.Sprintf("%d ms", sa.DurationMS), fmt.Sprintf("%d ms", sb.DurationMS)),
	}
}

// activityKey is what makes two exchanges "the same request" for the
// alignment: method, host and path (an LLM call: its model too).
func activityKey(v *View, i int) string {
	x := v.HTTP[i]
	where := x.URL
	if u, err := url.Parse(x.URL); err == nil {
		where = u.Host + u.Path
	}
	if x.LLM >= 0 {
		return "llm " + v.LLM[x.LLM].Model + " " + where
	}
	return x.Method + " " + where
}

// alignTimelines aligns the two runs' exchanges on their keys (a shortest
// edit script); a run of deletions next to a run of insertions is paired
// as changed rows.
func alignTimelines(a, b *View) []Pair {
	ka := make([]string, len(a.HTTP))
	for i := range ka {
		ka[i] = activityKey(a, i)
	}
	kb := make([]string, len(b.HTTP))
	for i := range kb {
		kb[i] = activityKey(b, i)
	}
	kind := func(v *View, i int) string {
		if i >= 0 && v.HTTP[i].LLM >= 0 {
			return "llm"
		}
		return "http"
	}
	out := []Pair{} // never null in the page's data, even with no exchanges
	var dels, adds []int
	flush := func() {
		for i := range max(len(dels), len(adds)) {
			p := Pair{A: -1, B: -1}
			switch {
			case i < len(dels) && i < len(adds):
				p.A, p.B, p.State = dels[i], adds[i], "changed"
			case i < len(dels):
				p.A, p.State = dels[i], "only_a"
			default:
				p.B, p.State = adds[i], "only_b"
			}
			p.Kind = kind(a, p.A)
			if p.A < 0 {
				p.Kind = kind(b, p.B)
			}
			out = append(out, p)
		}
		dels, adds = nil, nil
	}
	for _, o := range editScript(ka, kb) {
		switch o.kind {
		case '-':
			dels = append(dels, o.a)
		case '+':
			adds = append(adds, o.b)
		default:
			flush()
			state := "same"
			if !sameExchange(a.HTTP[o.a], b.HTTP[o.b]) {
				state = "changed"
			}
			out = append(out, Pair{Kind: kind(a, o.a), A: o.a, B: o.b, State: state})
		}
	}
	flush()
	return out
}

func sameExchange(x, y Exchange) bool {
	body := func(b *Body) string {
		if b == nil {
			return ""
		}
		return b.Text
	}
	return x.Method == y.Method && x.URL == y.URL && x.Status == y.Status &&
		body(x.ReqBody) == body(y.ReqBody) && body(x.RespBody) == body(y.RespBody)
}

// pairLLM compares the i-th LLM call of each run, message by message and
// then the response (Index -1).
func pairLLM(a, b *View, i int) LLMPair {
	p := LLMPair{A: -1, B: -1, Same: true, Messages: []MessageDiff{}}
	var ma, mb []Message
	var ra, rb *Message
	if i < len(a.LLM) {
		p.A, ma, ra = i, a.LLM[i].Messages, &a.LLM[i].Response
	}
	if i < len(b.LLM) {
		p.B, mb, rb = i, b.LLM[i].Messages, &b.LLM[i].Response
	}
	if p.A >= 0 && p.B >= 0 && a.LLM[i].Model != b.LLM[i].Model {
		p.Same, p.Model = false, a.LLM[i].Model+" → "+b.LLM[i].Model
	}
	cmpMsg := func(index int, x, y *Message) MessageDiff {
		d := MessageDiff{Index: index}
		switch {
		case x == nil:
			d.Role, d.State = y.Role, "only_b"
		case y == nil:
			d.Role, d.State = x.Role, "only_a"
		case *x == *y:
			d.Role, d.State = x.Role, "same"
		default:
			d.Role, d.State = x.Role, "changed"
			if x.Role != y.Role {
				d.Role = x.Role + " → " + y.Role
			}
			d.Diff = unified(x.Text+"\n", y.Text+"\n", "A", "B")
		}
		if d.State != "same" {
			p.Same = false
		}
		return d
	}
	at := func(ms []Message, j int) *Message {
		if j < len(ms) {
			return &ms[j]
		}
		return nil
	}
	for j := range max(len(ma), len(mb)) {
		p.Messages = append(p.Messages, cmpMsg(j, at(ma, j), at(mb, j)))
	}
	if ra != nil || rb != nil {
		p.Messages = append(p.Messages, cmpMsg(-1, ra, rb))
	}
	return p
}

// pairFiles lists every path either run changed.
func pairFiles(ba, bb *bundle.Bundle, a, b *View, lim Limits) []FilePair {
	fa, fb := map[string]File{}, map[string]File{}
	var paths []string
	for _, f := range a.Files {
		fa[f.Path] = f
		paths = append(paths, f.Path)
	}
	for _, f := range b.Files {
		if _, ok := fa[f.Path]; !ok {
			paths = append(paths, f.Path)
		}
		fb[f.Path] = f
	}
	slices.Sort(paths)
	describe := func(f File, ok bool) string {
		if !ok {
			return ""
		}
		if f.Op == fsdiff.OpDeleted {
			return "deleted"
		}
		return fmt.Sprintf("%s %s, %d B", f.Op, f.Kind, f.Size)
	}
	var out []FilePair
	for _, p := range paths {
		x, inA := fa[p]
		y, inB := fb[p]
		fp := FilePair{Path: p, A: describe(x, inA), B: describe(y, inB)}
		switch {
		case !inB:
			fp.State = "only_a"
		case !inA:
			fp.State = "only_b"
		case x.Op == y.Op && x.Kind == y.Kind && x.Hash == y.Hash && x.Mode == y.Mode && x.LinkTarget == y.LinkTarget:
			fp.State = "same"
		default:
			fp.State = "changed"
			if x.Kind == fsdiff.KindFile && y.Kind == fsdiff.KindFile && x.Op != fsdiff.OpDeleted && y.Op != fsdiff.OpDeleted &&
				x.Size <= lim.DiffBytes && y.Size <= lim.DiffBytes {
				fp.Diff = contentDiff(ba, bb, p, lim)
			}
		}
		out = append(out, fp)
	}
	return out
}

// contentDiff is the unified diff of the file p as run A left it to p as
// run B left it, "" when either is binary or unreadable.
func contentDiff(ba, bb *bundle.Bundle, p string, lim Limits) string {
	rel := "fs-diff/files/" + fsdiff.MirrorPath(p)
	read := func(b *bundle.Bundle) []byte {
		data, err := b.ReadPrefix(rel, lim.DiffBytes)
		if err != nil {
			return nil
		}
		return data
	}
	x, y := read(ba), read(bb)
	if x == nil || y == nil || isBinary(x) || isBinary(y) {
		return ""
	}
	return unified(string(x), string(y), "A/"+p, "B/"+p)
}

// pairLog compares logs/name of the two bundles whole, streaming.
func pairLog(ba, bb *bundle.Bundle, name string) LogPair {
	rel := "logs/" + name
	lp := LogPair{Name: name, Same: true}
	fa, errA := ba.OpenFile(rel)
	fb, errB := bb.OpenFile(rel)
	if errA != nil || errB != nil {
		if fa != nil {
			fa.Close()
		}
		if fb != nil {
			fb.Close()
		}
		lp.Same = (errA != nil) == (errB != nil)
		if !lp.Same {
			lp.First = "only one of the bundles has " + rel
		}
		return lp
	}
	defer fa.Close()
	defer fb.Close()
	// The first differing line is looked for in the first 1 MiB; the
	// equality of the rest is checked without keeping it.
	const window = 1 << 20
	ha, _ := io.ReadAll(io.LimitReader(fa, window))
	hb, _ := io.ReadAll(io.LimitReader(fb, window))
	if !bytes.Equal(ha, hb) {
		lp.Same, lp.First = false, match.FirstLineDiff(ha, hb)
		return lp
	}
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, bufA)
		nb, eb := io.ReadFull(fb, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			lp.Same, lp.First = false, "the logs differ after their first MiB"
			return lp
		}
		if ea != nil || eb != nil {
			return lp
		}
	}
}
