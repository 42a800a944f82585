package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/show"
)

// Options configure a dashboard.
type Options struct {
	Roots []string
	// Alpha is the significance level of the comparisons (0: 0.05).
	Alpha float64
	// Interval is how often a server scans the directories again (0: one
	// second).
	Interval time.Duration
	// GeneratedBy names the program, for the page.
	GeneratedBy string
	// Trust decides which run bundles' show pages are shown without a
	// warning (nil: every signer is shown with a warning).
	Trust *bundle.Trust
}

func (o *Options) defaults() {
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
}

// Build scans the directories once and returns the model of a page that
// stands alone (no live updates; runs link to their report.html relative
// to the directory of the page, pageDir).
func Build(o Options, pageDir string) *Model {
	o.defaults()
	s := newScanner(o.Roots)
	fs, problems := s.scan()
	m := &Model{Version: PageVersion, GeneratedBy: o.GeneratedBy, Roots: o.Roots, Alpha: o.Alpha,
		Evaluations: build(o.Roots, fs, o.Alpha), Problems: problems}
	for _, e := range m.Evaluations {
		if e.State != "done" {
			continue
		}
		for _, f := range fs {
			if display(o.Roots, f.dir) == e.Dir {
				if rel, err := filepath.Rel(pageDir, filepath.Join(f.dir, "report.html")); err == nil {
					e.Report = filepath.ToSlash(rel)
				}
			}
		}
	}
	if m.Problems == nil {
		m.Problems = []Problem{}
	}
	return m
}

// Server serves the dashboard and its live updates.
type Server struct {
	o       Options
	scanner *scanner

	mu       sync.Mutex
	seq      uint64
	evals    map[string]*entry
	order    []string // keys in the model's order
	gone     map[string]uint64
	problems []byte
	probSeq  uint64
	subs     map[chan struct{}]bool
}

// entry is one evaluation's JSON as last sent, and when it changed.
type entry struct {
	e    *Eval
	data []byte
	seq  uint64
}

// NewServer scans the directories once.
func NewServer(o Options) *Server {
	o.defaults()
	s := &Server{o: o, scanner: newScanner(o.Roots), evals: map[string]*entry{}, gone: map[string]uint64{}, subs: map[chan struct{}]bool{}}
	s.Rescan()
	return s
}

// Rescan scans the directories again and records what changed.
func (s *Server) Rescan() {
	fs, problems := s.scanner.scan()
	if !s.scanner.changed && s.seq > 0 {
		return // the same files: the same model
	}
	evals := build(s.o.Roots, fs, s.o.Alpha)
	if problems == nil {
		problems = []Problem{}
	}
	pdata, _ := json.Marshal(problems)
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.seq + 1
	changed := false
	keep := map[string]bool{}
	s.order = s.order[:0]
	for _, e := range evals {
		if e.State == "done" {
			e.Report = "report/" + e.Key
		}
		data, err := json.Marshal(e)
		if err != nil {
			continue
		}
		keep[e.Key] = true
		s.order = append(s.order, e.Key)
		if old, ok := s.evals[e.Key]; ok && bytes.Equal(old.data, data) {
			old.e = e // the same data; the newest directories for /run
			continue
		}
		s.evals[e.Key] = &entry{e: e, data: data, seq: next}
		delete(s.gone, e.Key)
		changed = true
	}
	for k := range s.evals {
		if !keep[k] {
			delete(s.evals, k)
			s.gone[k] = next
			changed = true
		}
	}
	if !bytes.Equal(pdata, s.problems) {
		s.problems, s.probSeq, changed = pdata, next, true
	}
	if changed {
		s.seq = next
		for c := range s.subs {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
}

// Run scans the directories every Options.Interval until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Rescan()
		}
	}
}

// Handler is the dashboard's HTTP handler. addr is the address it
// listens on: requests naming another host are refused (a web page
// elsewhere cannot reach it by DNS rebinding).
func (s *Server) Handler(addr string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /model.json", s.modelJSON)
	mux.HandleFunc("GET /run/{key}/{index}", s.run)
	mux.HandleFunc("GET /report/{key}", s.reportHTML)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowedHost(r.Host, addr) {
			http.Error(w, "this dashboard answers only to the address it listens on", http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		mux.ServeHTTP(w, r)
	})
}

func allowedHost(host, addr string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	lh, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(lh); lh == "" || ip != nil && ip.IsUnspecified() {
		return true // listening everywhere: the user chose to
	}
	return h == lh || h == "localhost" || h == "127.0.0.1" || h == "::1" || strings.Trim(h, "[]") == lh
}

// snapshot writes the current model as JSON: the evaluations' data as
// marshalled by Rescan.
func (s *Server) snapshot(w io.Writer) error {
	s.mu.Lock()
	head, _ := json.Marshal(struct {
		Version     int      `json:"version"`
		GeneratedBy string   `json:"generated_by"`
		Roots       []string `json:"roots"`
		Live        bool     `json:"live"`
		Seq         uint64   `json:"seq"`
		Alpha       float64  `json:"alpha"`
	}{PageVersion, s.o.GeneratedBy, s.o.Roots, true, s.seq, s.o.Alpha})
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"problems":`)
	b.Write(s.problems)
	b.WriteString(`,"evaluations":[`)
	for k, key := range s.order {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(s.evals[key].data)
	}
	b.WriteString("]}")
	s.mu.Unlock() // a slow client does not hold up the scans
	_, err := w.Write(b.Bytes())
	return err
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	writePage(w, true, s.snapshot)
}

func (s *Server) modelJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	s.snapshot(w)
}

// events streams the evaluations that change after the page's sequence
// number (?since=N): event "eval" with an evaluation's data, "gone" with
// the key of one that is no longer there, "problems" with the list, then
// "seq" with the sequence number they bring the page to.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		since, _ = strconv.ParseUint(id, 10, 64)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[wake] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, wake)
		s.mu.Unlock()
	}()
	// The headers go now: a client waits for them before it reads events.
	io.WriteString(w, ": dal dashboard\n\n")
	fl.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		var b bytes.Buffer
		s.mu.Lock()
		if s.seq > since {
			for _, key := range s.order {
				if en := s.evals[key]; en.seq > since {
					b.WriteString("event: eval\ndata: ")
					b.Write(en.data)
					b.WriteString("\n\n")
				}
			}
			for key, seq := range s.gone {
				if seq > since {
					fmt.Fprintf(&b, "event: gone\ndata: %q\n\n", key)
				}
			}
			if s.probSeq > since {
				b.WriteString("event: problems\ndata: ")
				b.Write(s.problems)
				b.WriteString("\n\n")
			}
			since = s.seq
			fmt.Fprintf(&b, "id: %d\nevent: seq\ndata: %d\n\n", since, since)
		}
		s.mu.Unlock()
		if b.Len() > 0 {
			if _, err := w.Write(b.Bytes()); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-keepalive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// lookup finds evaluation key's bundle directory of run index.
func (s *Server) lookup(key string, index int) (*Eval, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.evals[key]
	if en == nil {
		return nil, ""
	}
	return en.e, en.e.dirs[index]
}

// run serves the dal-exec show page of one run's bundle.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	index, err := strconv.Atoi(r.PathValue("index"))
	e, dir := s.lookup(r.PathValue("key"), index)
	if err != nil || e == nil || dir == "" {
		http.Error(w, "no such run: the evaluation is no longer in the dashboard's directories; reload the dashboard", http.StatusNotFound)
		return
	}
	b, err := bundle.Open(dir, bundle.OpenOptions{Trust: s.o.Trust, AllowUntrusted: true})
	if err != nil {
		http.Error(w, fmt.Sprintf("run %d's bundle %s cannot be shown: %v", index, dir, err), http.StatusUnprocessableEntity)
		return
	}
	defer b.Close()
	page := &show.Page{GeneratedBy: s.o.GeneratedBy, Runs: []*show.View{show.Load(b, fmt.Sprintf("%s run %d", e.Dir, index), show.DefaultLimits)}}
	var buf bytes.Buffer
	if err := show.Write(&buf, page); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// reportHTML serves a finished evaluation's report.html.
func (s *Server) reportHTML(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	en := s.evals[r.PathValue("key")]
	var dir string
	if en != nil && en.e.State == "done" {
		for _, d := range en.e.dirs {
			dir = filepath.Dir(filepath.Dir(d)) // DIR/runs/NNN
			break
		}
	}
	s.mu.Unlock()
	if dir == "" {
		http.Error(w, "no such evaluation: reload the dashboard", http.StatusNotFound)
		return
	}
	data, err := readRegular(filepath.Join(dir, "report.html"), maxReportBytes)
	if err != nil {
		http.Error(w, fmt.Sprintf("%s/report.html %v", dir, err), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(data)
}

// ListenAndServe serves on addr until ctx ends; ready is called with the
// page's URL once the server listens.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (%v): give another --listen address, e.g. 127.0.0.1:0 for any free port", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(ln.Addr().String()), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go s.Run(ctx)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	ready("http://" + ln.Addr().String() + "/")
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
