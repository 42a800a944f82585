package show

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/boundary"
	"github.com/dal-runtime/dal/internal/format/fsdiff"
	"github.com/dal-runtime/dal/internal/format/runenv"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/vclock"
)

// Limits bound what the page embeds of a bundle.
type Limits struct {
	LogBytes    int64 // of each log: half from its start, half from its end
	BodyBytes   int   // of each HTTP body
	BodiesBytes int64 // of all HTTP bodies together
	DiffBytes   int64 // largest file (each side) that gets a diff
	DiffsBytes  int64 // of all diffs together
	Files       int   // file changes listed
	Events      int   // crossings from syscalls.json
	Chunks      int   // streamed chunks per exchange
	// HARBytes caps what is read of network.har (entries past it are
	// left out, with a notice); JSONBytes each other JSON file read
	// whole (prompts/, syscalls.json, changes.json, ...), PromptsBytes
	// all prompts/ files together.
	HARBytes     int64
	JSONBytes    int64
	PromptsBytes int64
}

// DefaultLimits keep a page of a very large run under a few tens of MB.
var DefaultLimits = Limits{
	LogBytes:     1 << 20,
	BodyBytes:    64 << 10,
	BodiesBytes:  32 << 20,
	DiffBytes:    1 << 20,
	DiffsBytes:   16 << 20,
	Files:        20000,
	Events:       20000,
	Chunks:       2000,
	HARBytes:     128 << 20,
	JSONBytes:    128 << 20,
	PromptsBytes: 128 << 20,
}

// Load reads the opened bundle b into a View named name. A component that
// is missing is shown empty; one that cannot be read is named in the
// View's notices, so a damaged part never hides the rest. b must stay open
// until Load returns.
func Load(b *bundle.Bundle, name string, lim Limits) *View {
	// Empty lists are [] in the page's JSON, never null.
	l := &loader{b: b, lim: lim, v: &View{Name: name, Notices: []string{}, Streams: []Stream{}, LLM: []LLMCall{}, HTTP: []Exchange{},
		Events: []Event{}, Checkpoints: []Checkpoint{}, Files: []File{}, Logs: []Log{}}}
	l.signer()
	for _, why := range b.Manifest.Dal.Incomplete {
		l.notice("This bundle is incomplete: %s", why)
	}
	l.summary()
	l.streams()
	l.network()
	l.boundary()
	l.iterations()
	l.files()
	l.logs()
	l.replays()
	return l.v
}

// loader reads one bundle; each step fills its part of v.
type loader struct {
	b     *bundle.Bundle
	lim   Limits
	v     *View
	env   runenv.Env
	start time.Time // the run's start, origin of the timeline
	left  int64     // body budget left
	diffs int64     // diff budget left
}

func (l *loader) notice(format string, args ...any) {
	l.v.Notices = append(l.v.Notices, fmt.Sprintf(format, args...))
}

// readJSON decodes the component rel into v; false when the bundle has
// none or it is unreadable (said in a notice).
func (l *loader) readJSON(rel string, v any) bool {
	if !l.b.Has(rel) {
		return false
	}
	if size := l.size(rel); size > l.lim.JSONBytes {
		l.notice("%s is %s, more than this page loads of one file (%s, --max-load-bytes): it is not shown; the bundle holds it.", rel, mb(size), mb(l.lim.JSONBytes))
		return false
	}
	if err := l.b.ReadJSON(rel, v); err != nil {
		l.notice("%s could not be read: %v", rel, err)
		return false
	}
	return true
}

// size is the size of the bundle file rel, -1 when it cannot be read.
func (l *loader) size(rel string) int64 {
	f, err := l.b.OpenFile(rel)
	if err != nil {
		return -1
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return -1
	}
	return fi.Size()
}

func (l *loader) signer() {
	s := l.b.Signer
	l.v.Signer = Signer{Fingerprint: s.Fingerprint, Trusted: s.Trusted, Source: s.Source}
	if !s.Trusted {
		l.notice("This bundle is intact but signed by %s, a key you do not trust: what it shows is what its signer wrote. Trust it with --key FILE.pub or --trust-signer %s.", s.Fingerprint, s.Fingerprint)
	}
	for _, w := range l.b.Warnings {
		l.notice("%s", w)
	}
}

func (l *loader) summary() {
	m := l.b.Manifest
	st := l.b.ReplayStatus()
	s := &l.v.Summary
	s.Model = m.Config.Model.ID
	if s.Model == bundle.ModelNone {
		s.Model = ""
	}
	if m.Metrics != nil {
		s.TokensIn, s.TokensOut = m.Metrics.TokensInput, m.Metrics.TokensOutput
	}
	s.SnapshotID, s.CapturedAt = m.SnapshotID, m.CapturedAt.UTC().Format(time.RFC3339)
	s.MatchStatus, s.ReplayCount = st.MatchStatus, st.ReplayCount
	s.Mode = m.Config.ExecutionMode
	if !l.readJSON("env.json", &l.env) {
		return
	}
	e := &l.env
	s.Command, s.Mode, s.Seed = e.Command, e.Mode, e.Seed
	s.Epoch = e.Epoch.UTC().Format(time.RFC3339Nano)
	s.ExitCode, s.TimedOut, s.DurationMS = e.ExitCode, e.TimedOut, e.DurationMS
	s.StartedAt = e.StartedAt.UTC().Format(time.RFC3339Nano)
	s.Workspace, s.Cwd, s.DalVersion = e.Workspace, e.Cwd, e.DalVersion
	s.Host = fmt.Sprintf("%s (%s, %s, %d CPUs)", e.Host.Hostname, e.Host.Kernel, e.Host.Arch, e.Host.CPUs)
	s.SelfContains = e.SelfContained
	l.start = e.StartedAt
	env := &l.v.Env
	env.GuardRails, env.Inherited, env.Kept = e.GuardRails, e.Inherited, e.KeptValues
	env.Secrets, env.Scrubbed, env.Runtimes = e.Secrets, e.Scrubbed, e.Runtimes
	for _, d := range e.DeniedWrites {
		env.Denied = append(env.Denied, strings.TrimSpace(d.Op+" "+d.Path))
	}
	if e.Network != nil {
		env.Blocked = e.Network.Blocked
	}
}

func (l *loader) streams() {
	var f vclock.File
	if !l.readJSON("clock.json", &f) {
		return
	}
	for _, s := range f.Streams {
		parent, depth := "", strings.Count(s.Stream, ".")
		if i := strings.LastIndexByte(s.Stream, '.'); i >= 0 {
			parent = s.Stream[:i]
		}
		l.v.Streams = append(l.v.Streams, Stream{ID: s.Stream, Parent: parent, Depth: depth, Runtime: s.Runtime,
			Reported: s.Reported, Reads: s.Reads, SleepNS: s.SleepNS, NowNS: s.NowNS, Timers: len(s.Timers), Draws: s.Draws})
	}
	// Spawn order: "0", "0.1", "0.1.1", "0.2", ... (numeric per level).
	slices.SortFunc(l.v.Streams, func(a, b Stream) int { return compareStreamIDs(a.ID, b.ID) })
}

func compareStreamIDs(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(pa), len(pb)) {
		if c := cmp.Or(cmp.Compare(len(pa[i]), len(pb[i])), strings.Compare(pa[i], pb[i])); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(pa), len(pb))
}

// network reads network.har and prompts/.
func (l *loader) network() {
	l.left = l.lim.BodiesBytes
	bySeq := map[int]int{}
	cut := 0
	if l.b.Has("network.har") {
		if err := l.readHAR(func(e *har.Entry) {
			if l.start.IsZero() {
				l.start = e.StartedDateTime
			}
			x := l.exchange(e, &cut)
			bySeq[x.Seq] = len(l.v.HTTP)
			l.v.HTTP = append(l.v.HTTP, x)
		}); err != nil {
			l.notice("network.har could not be read: %v", err)
			l.v.HTTP, bySeq, cut = []Exchange{}, map[int]int{}, 0
		}
	}
	if cut > 0 {
		l.notice("%d HTTP bodies are cut or left out of this page to keep it small; network.har in the bundle holds them whole.", cut)
	}
	budget := l.lim.PromptsBytes
	names := l.promptFiles()
	for i, rel := range names {
		if budget -= max(l.size(rel), 0); budget < 0 {
			l.notice("prompts/ holds more than this page loads (%s, --max-load-bytes): it shows the first %d of %d LLM calls; the bundle holds them all.", mb(l.lim.PromptsBytes), i, len(names))
			break
		}
		var p prompts.Prompt
		if !l.readJSON(rel, &p) {
			continue
		}
		c := llmCall(&p, rel)
		if i, ok := bySeq[p.Seq]; ok && l.b.Has("network.har") {
			x := &l.v.HTTP[i]
			c.HTTP, c.StartMS, c.LatencyMS = i, x.StartMS, x.TimeMS
			if len(x.Chunks) > 0 {
				c.FirstChunk = x.Chunks[0].AtMS
			}
			x.LLM = len(l.v.LLM)
		}
		l.v.LLM = append(l.v.LLM, c)
	}
}

// readHAR decodes network.har's entries one at a time and hands each to
// use, so that what stays in memory is one entry and what the page keeps
// of the others. It reads at most lim.HARBytes of the file: past them it
// stops, and the page says how many exchanges it shows. A file read whole
// is hashed on the way: when it does not match the manifest (it changed
// since Open) the error says so and the caller drops what use kept.
func (l *loader) readHAR(use func(*har.Entry)) error {
	f, err := l.b.OpenFile("network.har")
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// What is read is hashed on the way: a file read whole must have
	// the manifest's hash, or the page shows none of it.
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, l.lim.HARBytes), h), 256<<10)
	dec := json.NewDecoder(br)
	if err := enterArray(dec, "log", "entries"); err != nil {
		if fi.Size() > l.lim.HARBytes {
			l.notice("network.har is %s, more than this page loads (%s, --max-load-bytes): its exchanges are not shown; the bundle holds them whole.", mb(fi.Size()), mb(l.lim.HARBytes))
			return nil
		}
		return err
	}
	n := 0
	for dec.More() {
		var e har.Entry
		if err := dec.Decode(&e); err != nil {
			if fi.Size() > l.lim.HARBytes {
				l.notice("network.har is %s, more than this page loads (%s, --max-load-bytes): the page shows its first %d exchanges; the bundle holds them all.", mb(fi.Size()), mb(l.lim.HARBytes), n)
				return nil
			}
			return fmt.Errorf("entry %d: %w", n, err)
		}
		use(&e)
		n++
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	if fi.Size() <= l.lim.HARBytes && "sha256:"+hex.EncodeToString(h.Sum(nil)) != l.b.Manifest.Dal.Files["network.har"] {
		return errors.New("it changed after the bundle was verified")
	}
	return nil
}

// enterArray moves dec, at the start of a JSON object, into the array at
// the path of keys (each an object member of the one before).
func enterArray(dec *json.Decoder, keys ...string) error {
	for i, key := range keys {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("it has no object holding %q: %v", key, err)
		}
		for {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			if t == json.Delim('}') {
				return fmt.Errorf("it has no %q", strings.Join(keys[:i+1], "."))
			}
			if t == key {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("its %q is not an array", strings.Join(keys, "."))
	}
	return nil
}

// mb is n bytes in MB, for a notice.
func mb(n int64) string {
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}

var promptName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^prompts/[0-9]{4,9}\.json$`) })

// promptFiles lists prompts/NNNN.json in call order (10000 after 9999).
func (l *loader) promptFiles() []string {
	var names []string
	for rel := range l.b.Manifest.Dal.Files {
		if promptName().MatchString(rel) {
			names = append(names, rel)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	return names
}

func (l *loader) exchange(e *har.Entry, cut *int) Exchange {
	x := Exchange{Method: e.Request.Method, URL: e.Request.URL, Status: e.Response.Status, StatusText: e.Response.StatusText,
		ReqSize: e.Request.BodySize, RespSize: e.Response.Content.Size, Mime: e.Response.Content.MimeType,
		TimeMS: e.Time, WaitMS: e.Timings.Wait, ReceiveMS: e.Timings.Receive, LLM: -1}
	if !l.start.IsZero() {
		x.StartMS = float64(e.StartedDateTime.Sub(l.start).Microseconds()) / 1000
	}
	if d := e.Dal; d != nil {
		x.Seq, x.Via, x.Error, x.Refused, x.Answered, x.Redactions = d.Seq, d.Via, d.Error, d.Refused, d.Answered, d.Redactions
		for i, c := range d.Chunks {
			if i == l.lim.Chunks {
				x.ChunksLeft = len(d.Chunks) - i
				break
			}
			text := c.Text
			if c.Encoding == "base64" {
				text = "(binary, base64) " + text
			}
			x.Chunks = append(x.Chunks, Chunk{AtMS: c.AtMs, Text: strings.Clone(clipString(text, 4096))})
		}
	}
	for _, h := range e.Request.Headers {
		x.ReqHeaders = append(x.ReqHeaders, [2]string{h.Name, h.Value})
	}
	for _, h := range e.Response.Headers {
		x.RespHeaders = append(x.RespHeaders, [2]string{h.Name, h.Value})
	}
	if p := e.Request.PostData; p != nil {
		x.ReqBody = l.body(p.Text, p.Encoding == "base64", cut)
	}
	if c := e.Response.Content; c.Text != "" {
		x.RespBody = l.body(c.Text, c.Encoding == "base64", cut)
	}
	return x
}

// body keeps a body's text within the limits.
func (l *loader) body(text string, b64 bool, cut *int) *Body {
	b := &Body{Size: len(text), Base64: b64}
	keep := min(int64(l.lim.BodyBytes), max(l.left, 0))
	if int64(len(text)) > keep {
		*cut++
		b.Cut = true
		text = clipString(text, int(keep))
	}
	l.left -= int64(len(text))
	b.Text = strings.Clone(text) // not a slice of the entry's whole body, which is dropped
	return b
}

// clipString cuts s to at most n bytes, on a rune boundary.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func llmCall(p *prompts.Prompt, rel string) LLMCall {
	c := LLMCall{File: rel, Seq: p.Seq, HTTP: -1, Provider: p.Provider, API: p.API, URL: p.URL, Status: p.Status, Model: p.Model,
		Stream: p.Stream, Chunks: p.Chunks, TokensIn: p.Usage.InputTokens, TokensOut: p.Usage.OutputTokens,
		Finish: p.Response.FinishReason, Error: p.Response.Error, Messages: []Message{}}
	if len(p.Parameters) > 0 {
		c.Params, _ = json.Marshal(p.Parameters)
	}
	if sys := flatten(p.System); sys != "" {
		c.Messages = append(c.Messages, Message{Role: "system", Text: sys})
	}
	c.Messages = append(c.Messages, chat(p.Messages)...)
	text := p.Response.Text
	for _, t := range p.Response.ToolCalls {
		text += fmt.Sprintf("\n[tool call %s] %s(%s)", t.ID, t.Name, t.Arguments)
	}
	c.Response = Message{Role: "assistant", Text: strings.TrimPrefix(text, "\n")}
	return c
}

// chat flattens the messages of any of the three APIs into role and text.
func chat(raw json.RawMessage) []Message {
	var s string
	if json.Unmarshal(raw, &s) == nil { // Responses: input as one string
		return []Message{{Role: "user", Text: s}}
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		return []Message{{Role: "input", Text: string(raw)}}
	}
	out := make([]Message, 0, len(items))
	for _, it := range items {
		m := Message{}
		_ = json.Unmarshal(it["role"], &m.Role)
		if m.Role == "" {
			_ = json.Unmarshal(it["type"], &m.Role) // Responses items: function_call, ...
		}
		var parts []string
		if t := flatten(it["content"]); t != "" {
			parts = append(parts, t)
		}
		var calls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		}
		if json.Unmarshal(it["tool_calls"], &calls) == nil {
			for _, c := range calls {
				parts = append(parts, fmt.Sprintf("[tool call %s] %s(%s)", c.ID, c.Function.Name, c.Function.Arguments))
			}
		}
		var id string
		if json.Unmarshal(it["tool_call_id"], &id) == nil && id != "" {
			parts = append([]string{"[result of " + id + "]"}, parts...)
		}
		if len(parts) == 0 { // an item of another shape: show it as sent
			delete(it, "role")
			b, _ := json.Marshal(it)
			parts = append(parts, string(b))
		}
		m.Text = strings.Join(parts, "\n")
		out = append(out, m)
	}
	return out
}

// flatten turns message content (a string, or a list of text, image,
// tool_use and tool_result parts) into text.
func flatten(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Name    string          `json:"name"`
		ID      string          `json:"id"`
		Input   json.RawMessage `json:"input"`
		Content json.RawMessage `json:"content"`
		UseID   string          `json:"tool_use_id"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var out []string
	for _, p := range parts {
		switch {
		case p.Text != "":
			out = append(out, p.Text)
		case p.Type == "tool_use":
			out = append(out, fmt.Sprintf("[tool call %s] %s(%s)", p.ID, p.Name, p.Input))
		case p.Type == "tool_result":
			out = append(out, fmt.Sprintf("[result of %s] %s", p.UseID, flatten(p.Content)))
		default:
			out = append(out, "["+p.Type+"]")
		}
	}
	return strings.Join(out, "\n")
}

func (l *loader) boundary() {
	var bd boundary.Boundary
	if !l.readJSON("syscalls.json", &bd) {
		return
	}
	// The page lists the events itself, up to its limit; a category the
	// file leaves null is left out.
	events := bd.Events
	bd.Events = nil
	cats := bd.Categories
	bd.Categories = map[string]*boundary.CategoryCover{}
	for name, c := range cats {
		if c != nil {
			bd.Categories[name] = c
		}
	}
	if bd.Escapes == nil {
		bd.Escapes = []boundary.Escape{}
	}
	l.v.Boundary = &bd
	for i, e := range events {
		if i == l.lim.Events {
			l.v.EventsLeft = len(events) - i
			break
		}
		l.v.Events = append(l.v.Events, Event{Kind: e.Kind, PID: e.PID, Detail: e.Detail})
	}
}

func (l *loader) iterations() {
	var s iterate.Selection
	if !l.readJSON("iterations/selection.json", &s) {
		return
	}
	its := &Iterations{Selected: s.Selected, Best: s.Best, Final: s.Final, Override: s.Override, Accepted: s.Accepted, Rationale: s.Rationale,
		Items: []Iteration{}}
	for _, f := range s.Degradation {
		its.Degradation = append(its.Degradation, fmt.Sprintf("iteration %d: %s", f.Iteration, f.Detail))
	}
	for _, it := range s.Iterations {
		x := Iteration{Seq: it.Seq, Score: it.Score, Source: it.Source, Accepted: it.Accepted, Note: it.Note, Delta: it.Delta,
			Dims: it.Dimensions, AtNS: it.AtNS, Artifacts: []string{}}
		for _, a := range it.Artifacts {
			x.Artifacts = append(x.Artifacts, a.Path)
		}
		its.Items = append(its.Items, x)
	}
	l.v.Iterations = its
}

func (l *loader) files() {
	const rel = "fs-diff/changes.json"
	if !l.b.Has(rel) {
		return
	}
	var cs []fsdiff.Change
	if !l.readJSON(rel, &cs) {
		return
	}
	if err := fsdiff.Validate(cs); err != nil {
		l.notice("%s: %v", rel, err)
		return
	}
	slices.SortFunc(cs, func(a, b fsdiff.Change) int { return strings.Compare(a.Path, b.Path) })
	if len(cs) > l.lim.Files {
		l.notice("The run changed %d files; this page lists the first %d by path: fs-diff/changes.json in the bundle lists them all.", len(cs), l.lim.Files)
		cs = cs[:l.lim.Files]
	}
	l.diffs = l.lim.DiffsBytes
	for _, c := range cs {
		f := File{Path: c.Path, Op: c.Op, Kind: c.Kind, Mode: fmt.Sprintf("%04o", c.Mode.Perm()), Size: c.Size, Hash: c.Hash,
			LinkTarget: c.LinkTarget, RenamedFrom: c.RenamedFrom}
		if c.Pre != nil {
			f.PreSize = c.Pre.Size
		}
		if c.Op == fsdiff.OpDeleted {
			f.PreSize, f.Size = c.Size, 0
		}
		if c.Kind == fsdiff.KindFile {
			l.fileDiff(&f, c)
		}
		l.v.Files = append(l.v.Files, f)
	}
}

// fileDiff fills the unified diff of a changed text file.
func (l *loader) fileDiff(f *File, c fsdiff.Change) {
	var before, after []byte
	var err error
	mirror := fsdiff.MirrorPath(c.Path)
	read := func(rel string, size int64) []byte {
		if err != nil {
			return nil
		}
		if size > l.lim.DiffBytes {
			f.NoDiff = fmt.Sprintf("larger than %d bytes: not diffed here", l.lim.DiffBytes)
			err = errSkip
			return nil
		}
		var data []byte
		data, err = l.readLimited(rel, l.lim.DiffBytes)
		return data
	}
	switch c.Op {
	case fsdiff.OpCreated:
		after = read("fs-diff/files/"+mirror, c.Size)
	case fsdiff.OpModified:
		if c.Pre != nil && c.Pre.Kind == fsdiff.KindFile {
			before = read("fs-pre/files/"+mirror, c.Pre.Size)
		}
		after = read("fs-diff/files/"+mirror, c.Size)
	case fsdiff.OpDeleted:
		before = read("fs-pre/files/"+mirror, c.Size)
	}
	switch {
	case errors.Is(err, errSkip):
		return
	case err != nil:
		f.NoDiff = fmt.Sprintf("not readable: %v", err)
		return
	case isBinary(before) || isBinary(after):
		f.Binary = true
		return
	}
	if l.diffs <= 0 {
		f.NoDiff = "left out: this page's room for diffs is spent"
		return
	}
	a, b := "a/"+c.Path, "b/"+c.Path
	if c.Op == fsdiff.OpCreated {
		a = "/dev/null"
	}
	if c.Op == fsdiff.OpDeleted {
		b = "/dev/null"
	}
	f.Diff = unified(string(before), string(after), a, b)
	l.diffs -= int64(len(f.Diff))
}

var errSkip = errors.New("skipped")

// readLimited reads the bundle file rel, at most limit bytes, checking
// the whole file's hash (bundle.ReadPrefix).
func (l *loader) readLimited(rel string, limit int64) ([]byte, error) {
	return l.b.ReadPrefix(rel, limit)
}

func isBinary(b []byte) bool {
	return bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b)
}

func (l *loader) logs() {
	for _, name := range []string{"stdout", "stderr", "dal.log"} {
		rel := "logs/" + name
		if !l.b.Has(rel) {
			continue
		}
		lg, err := l.log(rel, name)
		if err != nil {
			l.notice("%s could not be read: %v", rel, err)
			continue
		}
		l.v.Logs = append(l.v.Logs, lg)
	}
}

// log reads a log's head and tail, each half of LogBytes, cut at line
// boundaries when one is near.
func (l *loader) log(rel, name string) (Log, error) {
	f, err := l.b.OpenFile(rel)
	if err != nil {
		return Log{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Log{}, err
	}
	lg := Log{Name: name, Size: fi.Size()}
	if fi.Size() <= l.lim.LogBytes {
		data, err := io.ReadAll(f)
		lg.Head = strings.ToValidUTF8(string(data), "\uFFFD")
		return lg, err
	}
	half := l.lim.LogBytes / 2
	head := make([]byte, half)
	if _, err := io.ReadFull(f, head); err != nil {
		return Log{}, err
	}
	tail := make([]byte, half)
	if _, err := f.ReadAt(tail, fi.Size()-half); err != nil && !errors.Is(err, io.EOF) {
		return Log{}, err
	}
	if i := bytes.LastIndexByte(head, '\n'); i > len(head)/2 {
		head = head[:i+1]
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		tail = tail[i+1:]
	}
	lg.Head = strings.ToValidUTF8(string(head), "\uFFFD")
	lg.Tail = strings.ToValidUTF8(string(tail), "\uFFFD")
	lg.Omitted = fi.Size() - int64(len(head)) - int64(len(tail))
	return lg, nil
}

func (l *loader) replays() {
	r := &l.v.Replay
	r.Count = len(l.b.Replays)
	for _, u := range l.b.Unverified {
		r.Unverified = append(r.Unverified, Unverified{File: u.File, Reason: u.Reason})
	}
	if r.Count == 0 {
		return
	}
	o := l.b.Replays[r.Count-1]
	v := &Verdict{File: fmt.Sprintf("replays/%04d.json", o.Seq), At: o.At.UTC().Format(time.RFC3339), Fidelity: o.Fidelity,
		Status: o.MatchStatus, SignedBy: o.SignedBy.Fingerprint, Components: []Component{}}
	for name, ok := range o.Components {
		c := Component{Name: name, Match: ok}
		if !ok {
			c.First = o.Divergences[name]
			c.At = l.place(name, c.First)
		}
		v.Components = append(v.Components, c)
	}
	slices.SortFunc(v.Components, func(a, b Component) int {
		return cmp.Or(cmp.Compare(boolInt(a.Match), boolInt(b.Match)), strings.Compare(a.Name, b.Name))
	})
	r.Latest = v
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var (
	lineRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^first difference at line ([0-9]+)`) })
	promptRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(prompts/[0-9]+\.json)[^$]*(?:\$\.messages\[([0-9]+)\])?`)
	})
	requestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`request ([0-9]+) `) })
)

// place finds where a component's first divergence is in the page, from
// the sentence the replay wrote (match.FirstLineDiff, prompts.Diff,
// compareNetwork, compareFS); nil when it names no place.
func (l *loader) place(component, first string) *Place {
	switch component {
	case "stdout", "stderr":
		if m := lineRE().FindStringSubmatch(first); m != nil {
			var n int
			fmt.Sscan(m[1], &n)
			return &Place{Tab: "output", Item: component, Index: -1, Msg: -1, Line: n}
		}
	case "prompts":
		if m := promptRE().FindStringSubmatch(first); m != nil {
			for i, c := range l.v.LLM {
				if c.File == m[1] {
					msg := -1
					if m[2] != "" {
						fmt.Sscan(m[2], &msg)
						if len(c.Messages) > 0 && c.Messages[0].Role == "system" && c.API != prompts.ChatCompletions {
							msg++ // the system prompt is shown as the first message
						}
					}
					return &Place{Tab: "timeline", Kind: "llm", Index: i, Msg: msg}
				}
			}
		}
	case "network":
		if m := requestRE().FindStringSubmatch(first); m != nil {
			var n int
			fmt.Sscan(m[1], &n)
			if n >= 1 && n <= len(l.v.HTTP) {
				return &Place{Tab: "timeline", Kind: "http", Index: n - 1, Msg: -1}
			}
		}
	case "fs_diff":
		best := ""
		for _, f := range l.v.Files {
			if strings.HasPrefix(first, f.Path+": ") && len(f.Path) > len(best) {
				best = f.Path
			}
		}
		if best != "" {
			return &Place{Tab: "files", Item: best, Index: -1, Msg: -1}
		}
	}
	return nil
}
