// Package agent is dal's client for Go agents: virtual time, seeded
// randomness and child naming, served by the dald session dal-exec started.
//
// Go reads its clock in the vDSO and its runtime owns every timer, so a Go
// program cannot be virtualized from outside; it opts in by calling this
// package where it would call time and math/rand:
//
//	defer agent.Close()          // flushes logged ticks, reports the stream
//	start := agent.Now()         // 2026-01-01T00:00:00.000001Z in strict mode
//	agent.Sleep(2 * time.Second) // advances virtual time, returns at once
//	n := agent.Rand().Intn(10)   // seeded: derive(seed, "<stream>/go.rand")
//	io.ReadFull(agent.Reader, key)
//	cmd := agent.Command("python3", "child.py") // child gets the next stream name
//
// Outside dal-exec (no DAL_SESSION) every function falls back to the real
// clock and crypto/rand, so the same binary runs anywhere. The process joins
// its session with the DAL_SESSION_TOKEN dal-exec gave it; without the
// token dald refuses it and it runs on real time, saying so on stderr. Reads in strict
// mode are one atomic add: no system call, no IPC. The package keeps one
// connection to dald, used at start, for spawn names, for batched tick
// uploads (seeded and logged modes) and prefetches (replay), and at Close.
//
//	t := agent.NewTimer(30 * time.Second) // also NewTicker, AfterFunc, After
//	ctx, cancel := agent.WithTimeout(ctx, 5*time.Second)
//
// Timers, tickers and context deadlines made here run on the virtual clock
// in strict mode, in (deadline, registration order) order (package sched):
// time jumps to the next deadline when every other goroutine is blocked,
// under the outstanding-I/O rule of package vclock (timer.go says how).
//
// Not covered: time.Now, time.Sleep, time.After, time.NewTimer and
// context.WithTimeout called directly run on real time.
package agent

import (
	crand "crypto/rand"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/seedrng"
	"github.com/dal-runtime/dal/vclock"
)

type state struct {
	client  *wire.Client
	session string
	stream  string
	mode    string
	seed    uint64
	replay  bool
	batch   int
	clock   *vclock.Clock // strict
	timers  *timerEngine  // strict
	player  *vclock.Player
	rng     *rand.Rand
	reader  io.Reader
	rngMu   sync.Mutex
	readMu  sync.Mutex

	logMu  sync.Mutex
	kinds  []byte
	values []int64

	realReads  atomic.Int64
	roundTrips atomic.Int64
	closed     atomic.Bool
}

var (
	once sync.Once
	st   *state // nil outside dal
)

func get() *state {
	once.Do(func() { st = connect() })
	return st
}

func connect() *state {
	sock, sess := os.Getenv(wire.EnvSocket), os.Getenv(wire.EnvSession)
	if sock == "" || sess == "" {
		return nil
	}
	c, rep, err := wire.Dial(sock, wire.Request{Role: wire.RoleShim, Session: sess, Token: wire.Token(),
		Stream: os.Getenv(wire.EnvStream), Runtime: runtime.Version()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "dal: this Go process runs without virtual time: %v\n", err)
		return nil
	}
	// A strict recording replays as strict: its clock is computed, not
	// logged (the shims do the same).
	replay := rep.Replay && (rep.Mode == "seeded" || rep.Mode == "logged")
	s := &state{client: c, session: sess, stream: rep.Stream, mode: rep.Mode, seed: rep.Seed,
		replay: replay, batch: max(rep.Batch, 1)}
	s.roundTrips.Add(1)
	os.Setenv(wire.EnvStream, rep.Stream)
	cfg := vclock.Config{EpochNS: rep.EpochNS, MonoNS: rep.MonoNS, QuantumNS: rep.QuantumNS}
	switch {
	case replay:
		s.player = vclock.NewPlayer(s.fetchAll(), cfg.QuantumNS)
	case rep.Mode == "strict":
		s.clock = vclock.New(cfg)
		s.timers = newTimerEngine(s.clock, cfg.EpochNS)
	}
	switch rep.Mode {
	case "strict", "seeded":
		s.rng = rand.New(seedrng.Derive(rep.Seed, rep.Stream+"/go.rand"))
		s.reader = seedrng.Derive(rep.Seed, rep.Stream+"/go.reader")
	default:
		s.reader = crand.Reader
	}
	return s
}

// fetchAll prefetches the recorded ticks of this stream, page by page.
func (s *state) fetchAll() *vclock.Log {
	l := &vclock.Log{}
	for {
		rep, err := s.client.Call(wire.Request{Op: wire.OpTicksFetch, Session: s.session, From: l.Len(), Max: 65536})
		s.roundTrips.Add(1)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dal: fetch recorded ticks: %v\n", err)
			return l
		}
		l.Append(rep.Kinds, rep.Values)
		if rep.End || len(rep.Values) == 0 {
			return l
		}
	}
}

func (s *state) read(kind byte, real func() int64) int64 {
	switch {
	case s.player != nil:
		v, d := s.player.Read(kind)
		if d != nil {
			s.call(wire.Request{Op: wire.OpDrift, What: "clock", Detail: d.Reason})
		}
		return v
	case s.clock != nil:
		if kind == wire.KindRealtime {
			return s.clock.RealtimeNS()
		}
		return s.clock.MonotonicNS()
	}
	v := real()
	if s.mode == "seeded" || s.mode == "logged" {
		s.logMu.Lock()
		s.kinds = append(s.kinds, kind)
		s.values = append(s.values, v)
		full := len(s.values) >= s.batch
		s.logMu.Unlock()
		if full {
			s.flush()
		}
	}
	s.realReads.Add(1)
	return v
}

func (s *state) call(req wire.Request) (wire.Reply, error) {
	req.Session = s.session
	s.roundTrips.Add(1)
	return s.client.Call(req)
}

func (s *state) flush() {
	s.logMu.Lock()
	kinds, values := s.kinds, s.values
	s.kinds, s.values = nil, nil
	s.logMu.Unlock()
	if len(values) > 0 {
		if _, err := s.call(wire.Request{Op: wire.OpTicksPut, Kinds: kinds, Values: values}); err != nil {
			fmt.Fprintf(os.Stderr, "dal: upload clock ticks: %v\n", err)
		}
	}
}

var monoBase = time.Now()

// Now returns the current time: virtual in strict mode, recorded on replay,
// real (and logged) otherwise. The result carries no monotonic reading.
func Now() time.Time {
	s := get()
	if s == nil {
		return time.Now()
	}
	return time.Unix(0, s.read(wire.KindRealtime, func() int64 { return time.Now().UnixNano() })).UTC()
}

// Monotonic returns a monotonic clock reading in nanoseconds.
func Monotonic() time.Duration {
	s := get()
	if s == nil {
		return time.Since(monoBase)
	}
	return time.Duration(s.read(wire.KindMonotonic, func() int64 { return int64(time.Since(monoBase)) }))
}

// Since returns Now().Sub(t).
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Until returns t.Sub(Now()).
func Until(t time.Time) time.Duration { return t.Sub(Now()) }

// Sleep pauses for d: in strict mode and on replay it advances virtual time
// and returns at once (yielding the processor); otherwise it really sleeps.
func Sleep(d time.Duration) {
	s := get()
	switch {
	case s != nil && s.clock != nil:
		s.clock.Sleep(d)
		s.timers.afterSleep()
		runtime.Gosched()
	case s != nil && s.player != nil:
		runtime.Gosched()
	default:
		time.Sleep(d)
	}
}

// Rand returns the process's seeded generator (derive(seed,
// "<stream>/go.rand")) in strict and seeded modes, a randomly seeded one
// otherwise. It is safe for concurrent use; concurrent draws are
// deterministic only if their order is.
func Rand() *rand.Rand {
	s := get()
	if s == nil || s.rng == nil {
		return rand.New(lockedSource{src: rand.NewSource(time.Now().UnixNano())})
	}
	return rand.New(lockedSource{mu: &s.rngMu, src: s.rng})
}

type lockedSource struct {
	mu  *sync.Mutex
	src rand.Source
}

func (l lockedSource) Int63() int64 {
	if l.mu != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	return l.src.Int63()
}

func (l lockedSource) Seed(v int64) {
	if l.mu != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	l.src.Seed(v)
}

// Reader is a source of random bytes: derive(seed, "<stream>/go.reader") in
// strict and seeded modes, crypto/rand otherwise.
var Reader io.Reader = readerFunc(func(p []byte) (int, error) {
	s := get()
	if s == nil {
		return crand.Read(p)
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	return s.reader.Read(p)
})

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Stream returns this process's stream name ("" outside dal).
func Stream() string {
	if s := get(); s != nil {
		return s.stream
	}
	return ""
}

// Mode returns the session's mode ("" outside dal).
func Mode() string {
	if s := get(); s != nil {
		return s.mode
	}
	return ""
}

// Stats reports clock reads and IPC round trips so far.
type Stats struct {
	Reads      int64
	RoundTrips int64
}

// CurrentStats returns the process's counters.
func CurrentStats() Stats {
	s := get()
	if s == nil {
		return Stats{}
	}
	reads := s.realReads.Load()
	if s.clock != nil {
		reads = s.clock.Reads()
	}
	if s.player != nil {
		reads = int64(s.player.Served())
	}
	return Stats{Reads: reads, RoundTrips: s.roundTrips.Load()}
}

// Command is exec.Command with the child's stream name reserved first, so
// children are named in spawn order however they start.
func Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	s := get()
	if s == nil {
		return cmd
	}
	rep, err := s.call(wire.Request{Op: wire.OpSpawn})
	if err != nil {
		fmt.Fprintf(os.Stderr, "dal: reserve a stream for %s: %v\n", name, err)
		return cmd
	}
	cmd.Env = append(os.Environ(), wire.EnvStream+"="+rep.Child)
	return cmd
}

// Close uploads logged ticks and reports the stream to dald. Call it once,
// at the end of main; later calls do nothing.
func Close() error {
	s := get()
	if s == nil || s.closed.Swap(true) {
		return nil
	}
	s.flush()
	r := wire.Request{Op: wire.OpReport, Reads: CurrentStats().Reads}
	if s.clock != nil {
		r.SleepNS, r.NowNS = s.clock.SleptNS(), s.clock.Offset()
		r.Timers = s.timers.fired()
	}
	_, err := s.call(r)
	s.client.Close()
	return err
}
