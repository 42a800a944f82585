package sysvirt

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// realWaiter holds every wait the supervisor keeps in real time
// (waitReal) on one goroutine, in one poll over all their descriptors. A
// goroutine each would hold an OS thread each while it polls, and a thread
// the supervisor's runtime starts while the agent runs takes a pid in the
// agent's namespace (see the sandbox's warmThreads): however many threads
// of the agent wait at once, the waits take one thread, and none when no
// wait is held (the goroutine ends).
type realWaiter struct {
	mu      sync.Mutex
	added   []*heldWait
	running bool
	wake    int // an eventfd that cuts the poll short when a wait is added; -1 before the first
	once    sync.Once
}

// heldWait is one wait held in real time.
type heldWait struct {
	w *waitCall
	p *proc
	l *waitLook
	// mu guards l's copies against unhold while idle polls them; done
	// is set when they are closed.
	mu   sync.Mutex
	done bool
	// deadline is its timeout on the real clock: a wait that awaits no
	// response of the proxy's expires then (owed.go). stall is when one
	// that does expires anyway: its timeout or the stall limit, whichever
	// is later (an escape).
	deadline time.Time
	stall    time.Time
	recheck  time.Time // when to look again whether it could jump
}

// hold adds h to the waits held, starting the waiter when none runs.
func (r *realWaiter) hold(s *Supervisor, h *heldWait) {
	r.once.Do(func() {
		r.wake = -1
		if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
			r.wake = fd
		}
	})
	r.mu.Lock()
	r.added = append(r.added, h)
	start := !r.running
	r.running = true
	r.mu.Unlock()
	if start {
		go s.waitLoop()
		return
	}
	if r.wake >= 0 {
		unix.Write(r.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}

// take returns the waits added since the last call; false, and the
// waiter stops, when there are none and none is held.
func (r *realWaiter) take(held int) ([]*heldWait, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	added := r.added
	r.added = nil
	if len(added) == 0 && held == 0 {
		r.running = false
		return nil, false
	}
	return added, true
}

// waitLoop is the waiter: it polls every held wait's descriptors at once
// until the first timeout or look-again is due, then ends each wait whose
// call was answered or interrupted, whose descriptors became ready, whose
// timeout passed, or that can now jump.
func (s *Supervisor) waitLoop() {
	r := &s.waiter
	var held []*heldWait
	var fds []unix.PollFd
	for {
		added, ok := r.take(len(held))
		if !ok {
			return
		}
		held = append(held, added...)
		now := time.Now()
		next := now.Add(time.Hour)
		fds = fds[:0]
		if r.wake >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(r.wake), Events: unix.POLLIN})
		}
		for _, h := range held {
			fds = append(fds, h.l.watch...)
			next = minTime(next, minTime(h.stall, h.recheck))
			if now.Before(h.deadline) {
				next = minTime(next, h.deadline)
			}
		}
		// A millisecond more, as the poll's own rounding would cut it
		// short of the deadline.
		ms := int(max(next.Sub(now), 0).Milliseconds()) + 1
		n, err := unix.Poll(fds, ms)
		failed := err != nil && err != unix.EINTR
		at := 0
		if r.wake >= 0 {
			if fds[0].Revents != 0 {
				var b [8]byte
				unix.Read(r.wake, b[:])
			}
			at = 1
		}
		now = time.Now()
		kept := held[:0]
		for _, h := range held {
			ready := false
			if n > 0 {
				for _, f := range fds[at : at+len(h.l.watch)] {
					ready = ready || f.Revents != 0
				}
			}
			at += len(h.l.watch)
			if s.judge(h, ready || failed, now) {
				s.unhold(h)
				continue
			}
			kept = append(kept, h)
		}
		clear(held[len(kept):])
		held = kept
	}
}

// judge decides a held wait after a poll: true when it ended (answered
// here, or no longer the supervisor's to answer). ready says a descriptor
// it waits on is ready, or the poll failed: the kernel takes the call.
//
// A wait that awaits a response dal's proxy owes (owed.go) is not decided
// by its real timeout: it ends when the I/O is ready, without moving the
// clock, however long the response took, or when its process can jump,
// as it would have had the response been instant. So what the agent sees
// never depends on the network's latency. Only the stall limit, for a
// server that never answers or a thread that never blocks, lets real time
// decide: the wait expires and that is an escape, with a note. A wait on
// other outstanding I/O alone (an idle connection, a terminal, a child's
// pipe) expires at its real timeout, as the kernel's would.
func (s *Supervisor) judge(h *heldWait, ready bool, now time.Time) bool {
	w := h.w
	switch {
	case !Valid(s.fd, w.n.ID):
		return true // interrupted: it calls again, or not
	case ready:
		Continue(s.fd, w.n.ID)
		return true
	case !now.Before(h.recheck) || !now.Before(h.deadline) || !now.Before(h.stall):
		if h.l.canJump() {
			s.expire(w, h.p, "wait")
			return true
		}
		if !now.Before(h.deadline) && !s.awaited(h) {
			s.expire(w, h.p, "")
			return true
		}
		if !now.Before(h.stall) {
			s.mu.Lock()
			s.escaped("stall")
			s.counts.note("a timed wait was still waiting for a response at the stall limit (a server that did not answer, or a thread that never blocked): it expired on the real clock, so what followed is not reproducible")
			s.mu.Unlock()
			s.expire(w, h.p, "")
			return true
		}
		h.recheck = now.Add(recheck)
	}
	return false
}

// unhold closes what h held: its copies of the caller's descriptors and
// its pidfd.
func (s *Supervisor) unhold(h *heldWait) {
	// Only its own entry: the thread may already wait again (a signal
	// interrupted this call, and the runtime called again), held anew.
	s.realWaits.CompareAndDelete(h.w.pid, h)
	h.mu.Lock()
	h.done = true
	h.l.close()
	h.mu.Unlock()
	if h.l.pidfd >= 0 {
		unix.Close(h.l.pidfd)
	}
}

// idle reports whether h is still held with none of its descriptors
// ready.
func (h *heldWait) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return false
	}
	fds := slices.Clone(h.l.watch)
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
