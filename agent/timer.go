package agent

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/sched"
	"github.com/dal-runtime/dal/vclock"
)

// Timers on the virtual clock (strict mode).
//
// Every Timer, Ticker, AfterFunc and WithTimeout deadline of the process is
// one entry of a sched.Schedule: they fire in (deadline, registration order)
// order, at virtual instants. Time reaches a deadline in two ways:
//
//   - Sleep advances the clock and fires, before it returns, every timer
//     whose deadline it passed;
//   - when the rest of the program is idle, time jumps to the next deadline.
//
// Idle is the outstanding-I/O rule of package vclock, applied to
// goroutines. A dispatcher goroutine, started with the first timer, looks at
// every other goroutine (runtime.Stack) while timers are pending. Blocked on
// a channel, a select, a mutex, a condition, a WaitGroup, or in Accept (a
// listening server) counts as idle. Waiting for network or pipe I/O, or in a
// real time.Sleep, is outstanding: the dispatcher then waits up to the
// virtual distance to the next deadline in wall time for the program to go
// on, and jumps only if it does not. Running, runnable or in a system call
// is busy: the dispatcher waits.
//
// Limits: real timers (time.After, time.Sleep in a select) block on a channel
// and look idle, so virtual time may jump past them; an idle keep-alive
// connection of net/http waits in I/O, so timers pending beside it take their
// duration in wall time (bounded, never a hang). The dispatcher inspects
// goroutines only while a timer is pending, backing off from 50µs to 2ms
// between looks.
type timerEngine struct {
	clock *vclock.Clock
	epoch int64

	mu    sync.Mutex
	s     *sched.Schedule
	fires map[uint64]func(at int64) // by timer id; the schedule's Fire cannot take the deadline
	// started is closed once the last AfterFunc goroutine has started: the
	// next one waits for it, so callbacks start in firing order.
	started chan struct{}
	wake    chan struct{}
	start   sync.Once
	self    int64 // the dispatcher's goroutine id
}

// keepFired is how many firings the schedule remembers (the shims report at
// most 65536 too).
const keepFired = 65536

func newTimerEngine(clock *vclock.Clock, epoch int64) *timerEngine {
	started := make(chan struct{})
	close(started)
	return &timerEngine{clock: clock, epoch: epoch, s: sched.New(keepFired), fires: map[uint64]func(int64){},
		started: started, wake: make(chan struct{}, 1)}
}

// add schedules fire at d from now (every period after it when period > 0).
// fire runs with e.mu held, so it must not block: it sends on a buffered
// channel or starts a goroutine.
func (e *timerEngine) add(d, period time.Duration, fire func(at int64)) uint64 {
	e.start.Do(func() { go e.dispatch() })
	if d < 0 {
		d = 0
	}
	e.mu.Lock()
	id := e.s.Add(e.clock.Offset()+int64(d), int64(period), nil)
	e.fires[id] = fire
	e.mu.Unlock()
	e.poke()
	return id
}

func (e *timerEngine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// cancel removes a pending timer; it reports whether it was pending.
func (e *timerEngine) cancel(id uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.fires, id)
	return e.s.Cancel(id)
}

// fireDue fires every timer due at the clock's offset, in order. The
// caller holds e.mu. It reports how many fired.
func (e *timerEngine) fireDue() int {
	n := 0
	now := e.clock.Offset()
	for t := e.s.PopDue(now); t != nil; t = e.s.PopDue(now) {
		n++
		f := e.fires[t.ID]
		if t.Period <= 0 {
			delete(e.fires, t.ID)
		}
		if f != nil {
			f(t.Deadline)
		}
	}
	return n
}

// goInOrder runs f in a goroutine of its own that starts after the one
// the previous call made. The caller holds e.mu.
func (e *timerEngine) goInOrder(f func()) {
	prev, next := e.started, make(chan struct{})
	e.started = next
	go func() {
		<-prev
		close(next)
		f()
	}()
}

// afterSleep fires what a Sleep passed.
func (e *timerEngine) afterSleep() {
	e.mu.Lock()
	e.fireDue()
	e.mu.Unlock()
}

// realtime is the virtual realtime instant of offset off.
func (e *timerEngine) realtime(off int64) time.Time { return time.Unix(0, e.epoch+off).UTC() }

// dispatch is the dispatcher goroutine: it runs for the life of the process.
func (e *timerEngine) dispatch() {
	e.self = goid()
	var pause time.Duration
	var ioSince time.Time
	for {
		e.mu.Lock()
		e.fireDue()
		next, ok := e.s.Next()
		e.mu.Unlock()
		if !ok {
			<-e.wake
			pause, ioSince = 0, time.Time{}
			continue
		}
		switch e.look() {
		case stateIdle:
			e.jump(next)
			pause, ioSince = 0, time.Time{}
			continue
		case stateOutstanding:
			if ioSince.IsZero() {
				ioSince = time.Now()
			}
			if time.Since(ioSince) >= time.Duration(next-e.clock.Offset()) {
				e.jump(next)
				pause, ioSince = 0, time.Time{}
				continue
			}
		default:
			ioSince = time.Time{}
		}
		pause = min(max(2*pause, 50*time.Microsecond), 2*time.Millisecond)
		select {
		case <-e.wake:
			pause = 0
		case <-time.After(pause):
		}
	}
}

// jump advances the clock to deadline (if no one else did) and fires.
func (e *timerEngine) jump(deadline int64) {
	e.mu.Lock()
	if next, ok := e.s.Next(); ok && next == deadline {
		if d := deadline - e.clock.Offset(); d > 0 {
			e.clock.Sleep(time.Duration(d))
		}
	}
	e.fireDue()
	e.mu.Unlock()
}

const (
	stateBusy = iota
	stateOutstanding
	stateIdle
)

// look classifies the program's other goroutines: busy if one runs or can,
// outstanding if one waits for I/O or a real sleep, else idle.
func (e *timerEngine) look() int {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	state := stateIdle
	for len(buf) > 0 {
		var g []byte
		g, buf, _ = bytes.Cut(buf, []byte("\n\n"))
		id, status, ok := parseHeader(g)
		if !ok || id == e.self {
			continue
		}
		switch s := goroutineState(status, g); {
		case s == stateBusy:
			return stateBusy
		case s == stateOutstanding:
			state = stateOutstanding
		}
	}
	return state
}

// parseHeader reads "goroutine 7 [chan receive, 2 minutes]:".
func parseHeader(g []byte) (id int64, status string, ok bool) {
	line, _, _ := bytes.Cut(g, []byte("\n"))
	rest, found := bytes.CutPrefix(line, []byte("goroutine "))
	if !found {
		return 0, "", false
	}
	num, rest, found := bytes.Cut(rest, []byte(" ["))
	if !found {
		return 0, "", false
	}
	id, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return 0, "", false
	}
	status, _, _ = strings.Cut(string(rest), "]")
	status, _, _ = strings.Cut(status, ",")
	return id, status, true
}

// goroutineState classifies one goroutine from its status and stack.
func goroutineState(status string, stack []byte) int {
	switch status {
	case "running", "runnable", "preempted", "copystack":
		return stateBusy
	case "syscall":
		if bytes.Contains(stack, []byte("os/signal.signal_recv")) {
			return stateIdle // signal.Notify's loop waits for a signal
		}
		return stateBusy
	case "IO wait":
		if bytes.Contains(stack, []byte(").Accept(")) {
			return stateIdle // a listening server
		}
		return stateOutstanding
	case "sleep":
		return stateOutstanding
	}
	return stateIdle // chan send/receive, select, sync.*, semacquire, GC waits
}

// goid is the calling goroutine's id.
func goid() int64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	id, _, _ := parseHeader(b[:n])
	return id
}

// ---------------------------------------------------------------- API

// engine returns the process's virtual timer engine, or nil when timers
// are real (outside dal, or not strict).
func engine() *timerEngine {
	s := get()
	if s == nil || s.clock == nil {
		return nil
	}
	return s.timers
}

// Timer is time.Timer on dal's clock: in strict mode it fires at a virtual
// instant (see the package documentation); otherwise it is a time.Timer.
type Timer struct {
	C <-chan time.Time

	real *time.Timer
	e    *timerEngine
	c    chan time.Time
	f    func()
	mu   sync.Mutex
	id   uint64
}

// NewTimer is time.NewTimer on dal's clock: C receives the (virtual) time
// once d has passed.
func NewTimer(d time.Duration) *Timer {
	e := engine()
	if e == nil {
		t := time.NewTimer(d)
		return &Timer{C: t.C, real: t}
	}
	c := make(chan time.Time, 1)
	t := &Timer{C: c, e: e, c: c}
	t.arm(d)
	return t
}

// AfterFunc is time.AfterFunc on dal's clock: f runs in its own goroutine
// once d has passed. The Timer's C is nil.
func AfterFunc(d time.Duration, f func()) *Timer {
	e := engine()
	if e == nil {
		return &Timer{real: time.AfterFunc(d, f)}
	}
	t := &Timer{e: e, f: f}
	t.arm(d)
	return t
}

// After is NewTimer(d).C.
func After(d time.Duration) <-chan time.Time { return NewTimer(d).C }

func (t *Timer) arm(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id = t.e.add(d, 0, func(at int64) {
		if t.f != nil {
			t.e.goInOrder(t.f)
			return
		}
		select {
		case t.c <- t.e.realtime(at):
		default:
		}
	})
}

// Stop prevents the timer from firing; it reports whether it was pending.
func (t *Timer) Stop() bool {
	if t.real != nil {
		return t.real.Stop()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.e.cancel(t.id)
}

// Reset changes the timer to fire after d; it reports whether the timer was
// pending. As with Go 1.23's timers, a value not yet received from C is
// discarded.
func (t *Timer) Reset(d time.Duration) bool {
	if t.real != nil {
		return t.real.Reset(d)
	}
	pending := t.Stop()
	if t.c != nil {
		select {
		case <-t.c:
		default:
		}
	}
	t.arm(d)
	return pending
}

// Ticker is time.Ticker on dal's clock.
type Ticker struct {
	C <-chan time.Time

	real *time.Ticker
	e    *timerEngine
	c    chan time.Time
	mu   sync.Mutex
	id   uint64
}

// NewTicker is time.NewTicker on dal's clock: C receives the (virtual) time
// every d; a tick the receiver is not ready for is dropped, as with
// time.Ticker. d must be positive.
func NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("non-positive interval for agent.NewTicker")
	}
	e := engine()
	if e == nil {
		t := time.NewTicker(d)
		return &Ticker{C: t.C, real: t}
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, e: e, c: c}
	t.arm(d)
	return t
}

func (t *Ticker) arm(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id = t.e.add(d, d, func(at int64) {
		select {
		case t.c <- t.e.realtime(at):
		default:
		}
	})
}

// Stop turns the ticker off.
func (t *Ticker) Stop() {
	if t.real != nil {
		t.real.Stop()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.e.cancel(t.id)
}

// Reset stops the ticker and restarts it with period d (positive).
func (t *Ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("non-positive interval for agent.Ticker.Reset")
	}
	if t.real != nil {
		t.real.Reset(d)
		return
	}
	t.Stop()
	t.arm(d)
}

// WithTimeout is context.WithTimeout on dal's clock: the context is done
// with context.DeadlineExceeded once d of virtual time has passed. Its
// Deadline method reports a real-time instant d from the call, a backstop
// for standard library code that sets socket deadlines from it (a virtual
// instant there would be read against the real clock).
func WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	e := engine()
	if e == nil {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	vc := &timeoutCtx{Context: ctx, deadline: time.Now().Add(d)}
	t := AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return vc, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// WithDeadline is WithTimeout(parent, Until(deadline)), deadline being an
// instant on dal's clock (from Now).
func WithDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if engine() == nil {
		return context.WithDeadline(parent, deadline)
	}
	return WithTimeout(parent, Until(deadline))
}

type timeoutCtx struct {
	context.Context
	deadline time.Time
}

func (c *timeoutCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Err is context.DeadlineExceeded when the virtual deadline passed.
func (c *timeoutCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

func (c *timeoutCtx) Value(key any) any { return c.Context.Value(key) }

// fired is the firing order so far, [deadline offset ns, registration seq]
// (the report's timers).
func (e *timerEngine) fired() [][2]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.s.Fired()
	out := make([][2]int64, len(f))
	for i, x := range f {
		out[i] = [2]int64{x.Deadline, int64(x.Seq)}
	}
	return out
}
