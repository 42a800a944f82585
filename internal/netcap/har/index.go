package har

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Index serves a recorded log to live requests. It is safe for
// concurrent use. It reads the log's entries and does not modify them;
// the log must not change while the Index is in use.
type Index struct {
	log     *Log
	r       *Redactor
	headers []string

	mu       sync.Mutex
	queue    map[string][]int // key → entries not yet served, in seq order
	recorded map[string]int   // key → entries recorded
	asked    map[string]int   // key → live requests seen
	served   []bool
}

// NewIndex indexes log for replay. r (nil: the default [Redactor]) and
// headers must be those the log was recorded with; nil headers means the
// log's own _dal.key_headers.
func NewIndex(log *Log, r *Redactor, headers []string) *Index {
	if r == nil {
		r = defaultRedactor
	}
	if headers == nil && log.Dal != nil {
		headers = log.Dal.KeyHeaders
	}
	ix := &Index{
		log: log, r: r, headers: headers,
		queue:    map[string][]int{},
		recorded: map[string]int{},
		asked:    map[string]int{},
		served:   make([]bool, len(log.Entries)),
	}
	order := make([]int, len(log.Entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return log.Entries[a].Seq() - log.Entries[b].Seq() })
	for _, i := range order {
		if d := log.Entries[i].Dal; d != nil {
			ix.queue[d.Key] = append(ix.queue[d.Key], i)
			ix.recorded[d.Key]++
		}
	}
	return ix
}

// Next returns the recorded response for a live raw request: the first
// entry with its key not served yet. It returns a [*MissError] when there
// is none, and a [*RecordedFailure] when that entry recorded a failure.
func (ix *Index) Next(req *Request) (*Served, error) {
	key := ix.r.Key(req, ix.headers)
	ix.mu.Lock()
	ix.asked[key]++
	asked := ix.asked[key]
	q := ix.queue[key]
	if len(q) == 0 {
		recorded := ix.recorded[key]
		ix.mu.Unlock()
		if recorded > 0 {
			return nil, ix.exhausted(req, key, recorded, asked)
		}
		return nil, ix.miss(req)
	}
	i := q[0]
	ix.queue[key] = q[1:]
	ix.served[i] = true
	ix.mu.Unlock()

	e := &ix.log.Entries[i]
	if e.Dal.Error != "" {
		return nil, &RecordedFailure{Entry: i, Seq: e.Dal.Seq, Method: e.Request.Method, URL: e.Request.URL, Err: e.Dal.Error}
	}
	return serve(e, i)
}

// Unused lists the entries never served, in log order.
func (ix *Index) Unused() []int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var out []int
	for i, s := range ix.served {
		if !s {
			out = append(out, i)
		}
	}
	return out
}

// serve builds the response of entry e (index i): the body as received
// with the recorded headers when the entry keeps it (_dal.wire), else the
// decoded body with Content-Encoding, Content-Length and
// Transfer-Encoding made consistent with it, and a notice saying so.
func serve(e *Entry, i int) (*Served, error) {
	s := &Served{
		Status:     e.Response.Status,
		StatusText: e.Response.StatusText,
		Header:     http.Header{},
		Streamed:   e.Dal.Streamed,
		Entry:      i,
		Seq:        e.Dal.Seq,
	}
	for _, h := range e.Response.Headers {
		s.Header.Add(h.Name, h.Value)
	}
	size := 0
	var wire bool
	if s.Streamed {
		s.Chunks = make([]Chunk, len(e.Dal.Chunks))
		wire = len(e.Dal.Chunks) == 0 || e.Dal.Chunks[0].Wire != ""
		for j := range e.Dal.Chunks {
			c := &e.Dal.Chunks[j]
			get := c.Bytes
			if wire {
				get = c.WireBytes
			}
			b, err := get()
			if err != nil {
				return nil, fmt.Errorf("replay seq %d: chunk %d: %w", e.Dal.Seq, j, err)
			}
			s.Chunks[j] = Chunk{At: time.Duration(math.Round(c.AtMs*1000)) * time.Microsecond, Data: b}
			size += len(b)
		}
	} else {
		wire = e.Dal.Wire != ""
		get := e.Response.Content.Bytes
		if wire {
			get = e.Dal.WireBytes
		}
		b, err := get()
		if err != nil {
			return nil, fmt.Errorf("replay seq %d: body: %w", e.Dal.Seq, err)
		}
		s.Chunks = []Chunk{{Data: b}}
		size = len(b)
	}
	decoded := !wire && !e.Dal.Encoded && s.Header.Get("Content-Encoding") != ""
	if decoded {
		s.Header.Del("Content-Encoding")
		s.Notice = fmt.Sprintf("seq %d %s %s: the recording keeps only the decoded body (an older bundle, or a body that held a secret): replay sends it without its Content-Encoding",
			e.Dal.Seq, e.Request.Method, e.Request.URL)
	}
	s.Header.Del("Transfer-Encoding")
	_, hasLength := s.Header["Content-Length"]
	bodyless := e.Request.Method == http.MethodHead || s.Status/100 == 1 || s.Status == 204 || s.Status == 304
	switch {
	case bodyless:
		// The recorded Content-Length describes a body not sent; keep it
		// unless it was the length of a coding that replay removes.
		if decoded {
			s.Header.Del("Content-Length")
		}
	case s.Streamed && !hasLength:
		// Chunked, as recorded.
	default:
		s.Header.Set("Content-Length", strconv.Itoa(size))
	}
	if cc := e.Dal.ClientClosed; cc != nil {
		holdOpen(s, e, cc, decoded)
	}
	return s, nil
}

// holdOpen adjusts s for an entry whose client closed the connection
// early: only what had reached the client is sent (the streamed pieces it
// had been handed; of a plain body sent as received, its first bytes,
// under the recorded Content-Length), and the response is never ended. A
// plain body only kept content-decoded cannot be cut at a received
// offset: it is sent whole.
func holdOpen(s *Served, e *Entry, cc *DalClientClose, decoded bool) {
	s.HoldOpen = true
	switch {
	case e.Response.Status == 0:
		s.Chunks = nil // the client left before the response arrived
	case s.Streamed:
		s.Chunks = s.Chunks[:min(max(cc.Chunks, 0), len(s.Chunks))]
		if !cc.Read && s.Notice == "" {
			s.Notice = fmt.Sprintf("seq %d %s %s: the recording says how much of the stream dal had handed to the client when it closed, not how much it had read (an older bundle, or a client dal could not follow: not watchable, or not reading for 2 s): replay hands it the same %d chunk(s)",
				e.Dal.Seq, e.Request.Method, e.Request.URL, len(s.Chunks))
		}
	case !decoded && len(s.Chunks) == 1:
		b := s.Chunks[0].Data
		s.Chunks[0].Data = b[:min(max(cc.Bytes, 0), int64(len(b)))]
		s.Header.Del("Content-Length")
		for _, h := range e.Response.Headers {
			if strings.EqualFold(h.Name, "Content-Length") {
				s.Header.Set("Content-Length", h.Value)
			}
		}
	}
}

// RecordedFailure is the replay of an exchange that failed when it was
// recorded: the proxy fails the live request the same way.
type RecordedFailure struct {
	Entry, Seq  int
	Method, URL string // redacted
	Err         string // the recorded error, redacted
}

func (f *RecordedFailure) Error() string {
	return fmt.Sprintf("%s %s failed when it was recorded (seq %d): %s", f.Method, f.URL, f.Seq, f.Err)
}

// MissError is a live request that replay cannot serve: nothing recorded
// matches it, or it came more times than recorded. Every value in it is
// redacted.
type MissError struct {
	Method, URL string // the live request
	// Recorded > 0: the request matches Recorded entries, all served, and
	// this is its Request-th occurrence.
	Recorded, Request int
	// The nearest recorded request: entry index (-1 when the log has no
	// entries), seq, method and URL.
	Entry, Seq                int
	NearestMethod, NearestURL string
	// Diffs names the fields in which the live request differs from the
	// nearest one, e.g. `body $.messages[1].content: recorded "hi", got
	// "hello"`, `query temperature: recorded "0.7", got none`, `method:
	// recorded "GET", got "POST"`, `url path: ...`.
	Diffs []string
}

func (m *MissError) Error() string {
	switch {
	case m.Recorded > 0:
		times := "once"
		if m.Recorded > 1 {
			times = strconv.Itoa(m.Recorded) + " times"
		}
		return fmt.Sprintf("%s %s was recorded %s, this is request #%d", m.Method, m.URL, times, m.Request)
	case m.Entry < 0:
		return fmt.Sprintf("%s %s matches no recorded request: the recording has none", m.Method, m.URL)
	case len(m.Diffs) == 0:
		return fmt.Sprintf("%s %s matches no recorded request; the nearest is seq %d %s %s, which differs only in redacted values or key headers",
			m.Method, m.URL, m.Seq, m.NearestMethod, m.NearestURL)
	}
	shown := m.Diffs[:min(len(m.Diffs), 3)]
	more := ""
	if n := len(m.Diffs) - len(shown); n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("%s %s matches no recorded request; the nearest is seq %d %s %s, which differs in %s%s",
		m.Method, m.URL, m.Seq, m.NearestMethod, m.NearestURL, strings.Join(shown, "; "), more)
}

// redactedRequest is req as it would have been recorded.
func (ix *Index) redactedRequest(req *Request) (*EntryRequest, string) {
	e, err := FromExchange(&Exchange{Request: *req}, ix.r, ix.headers...)
	if err != nil {
		return &EntryRequest{Method: req.Method, URL: Redacted}, ""
	}
	return &e.Request, e.Dal.Key
}

func (ix *Index) exhausted(req *Request, key string, recorded, asked int) *MissError {
	live, _ := ix.redactedRequest(req)
	m := &MissError{Method: live.Method, URL: live.URL, Recorded: recorded, Request: asked, Entry: -1, Seq: -1}
	// The nearest is the last entry served for this key.
	for i := len(ix.log.Entries) - 1; i >= 0; i-- {
		e := &ix.log.Entries[i]
		if e.Dal != nil && e.Dal.Key == key && (m.Entry < 0 || e.Dal.Seq > m.Seq) {
			m.Entry, m.Seq, m.NearestMethod, m.NearestURL = i, e.Dal.Seq, e.Request.Method, e.Request.URL
		}
	}
	return m
}

// miss finds the nearest recorded request: among those with the same
// method and URL (query aside), else the same host and path, else all,
// the one with the fewest differences, then the lowest seq.
func (ix *Index) miss(req *Request) *MissError {
	live, key := ix.redactedRequest(req)
	m := &MissError{Method: live.Method, URL: live.URL, Entry: -1, Seq: -1}
	liveMethod, liveURL := readableKey(key)
	liveHostPath := hostPath(liveURL)
	tiers := [3][]int{}
	for i := range ix.log.Entries {
		e := &ix.log.Entries[i]
		if e.Dal == nil {
			continue
		}
		method, u := readableKey(e.Dal.Key)
		switch {
		case method == liveMethod && u == liveURL:
			tiers[0] = append(tiers[0], i)
		case hostPath(u) == liveHostPath:
			tiers[1] = append(tiers[1], i)
		default:
			tiers[2] = append(tiers[2], i)
		}
	}
	for _, tier := range tiers {
		if len(tier) == 0 {
			continue
		}
		type cand struct {
			i, seq int
			diffs  []string
		}
		var best *cand
		for _, i := range tier {
			e := &ix.log.Entries[i]
			c := &cand{i, e.Dal.Seq, ix.r.diffRequests(&e.Request, live, ix.headers)}
			if best == nil || cmp.Or(cmp.Compare(len(c.diffs), len(best.diffs)), cmp.Compare(c.seq, best.seq)) < 0 {
				best = c
			}
		}
		e := &ix.log.Entries[best.i]
		m.Entry, m.Seq, m.NearestMethod, m.NearestURL, m.Diffs = best.i, best.seq, e.Request.Method, e.Request.URL, best.diffs
		break
	}
	return m
}

// readableKey splits a key's readable part: method and URL.
func readableKey(key string) (method, u string) {
	method, rest, _ := strings.Cut(key, " ")
	if i := strings.LastIndex(rest, " sha256:"); i >= 0 {
		rest = rest[:i]
	}
	return method, rest
}

// hostPath strips the scheme of a normalized URL.
func hostPath(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		return rest
	}
	return u
}
