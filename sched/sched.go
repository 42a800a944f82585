// Package sched is dal's deterministic timer schedule: timers keyed by a
// virtual deadline fire in (deadline, registration order) order, and an idle
// process jumps its clock to the next deadline instead of waiting.
//
// It owns no goroutines and never reads a real clock: the caller (the Go
// client, or a test) drives it with the offsets of a vclock.Clock. The Python
// and Node shims implement the same ordering inside their event loops and
// report the firing order, which dald keeps as the session's timer schedule.
package sched

import "container/heap"

// Timer is one scheduled callback.
type Timer struct {
	ID       uint64
	Deadline int64 // virtual offset, ns
	Seq      uint64
	Period   int64 // >0 for a repeating timer
	Fire     func()
	index    int
}

// Fired records one firing, as reported in a session's timer schedule.
type Fired struct {
	Deadline int64
	Seq      uint64
}

// Schedule is a timer queue. It is not safe for concurrent use.
type Schedule struct {
	q      timerHeap
	byID   map[uint64]*Timer
	seq    uint64
	nextID uint64
	fired  []Fired
	keep   int
}

// New returns an empty schedule that remembers at most keep firings.
func New(keep int) *Schedule {
	return &Schedule{byID: make(map[uint64]*Timer), keep: keep}
}

// Add schedules fire at deadline (and every period after, if period > 0)
// and returns the timer's id.
func (s *Schedule) Add(deadline, period int64, fire func()) uint64 {
	s.nextID++
	s.seq++
	t := &Timer{ID: s.nextID, Deadline: deadline, Seq: s.seq, Period: period, Fire: fire}
	heap.Push(&s.q, t)
	s.byID[t.ID] = t
	return t.ID
}

// Cancel removes a timer; it reports whether the timer was pending.
func (s *Schedule) Cancel(id uint64) bool {
	t, ok := s.byID[id]
	if !ok {
		return false
	}
	heap.Remove(&s.q, t.index)
	delete(s.byID, id)
	return true
}

// Len returns the number of pending timers.
func (s *Schedule) Len() int { return len(s.q) }

// Next returns the earliest deadline.
func (s *Schedule) Next() (deadline int64, ok bool) {
	if len(s.q) == 0 {
		return 0, false
	}
	return s.q[0].Deadline, true
}

// PopDue removes and returns the first timer due at offset now, or nil. A
// repeating timer is rescheduled after its period with a new registration
// sequence, as Node and asyncio do. The firing is recorded.
func (s *Schedule) PopDue(now int64) *Timer {
	if len(s.q) == 0 || s.q[0].Deadline > now {
		return nil
	}
	t := heap.Pop(&s.q).(*Timer)
	delete(s.byID, t.ID)
	if len(s.fired) < s.keep {
		s.fired = append(s.fired, Fired{Deadline: t.Deadline, Seq: t.Seq})
	}
	if t.Period > 0 {
		s.seq++
		next := &Timer{ID: t.ID, Deadline: t.Deadline + t.Period, Seq: s.seq, Period: t.Period, Fire: t.Fire}
		heap.Push(&s.q, next)
		s.byID[next.ID] = next
	}
	return t
}

// RunIdle fires every timer due by the next deadline, advancing the clock
// through advance (which returns the offset after advancing). It is what an
// idle process does: time jumps to the next deadline. It returns the number
// of timers fired.
func (s *Schedule) RunIdle(advance func(to int64) int64) int {
	d, ok := s.Next()
	if !ok {
		return 0
	}
	now := advance(d)
	n := 0
	for t := s.PopDue(now); t != nil; t = s.PopDue(now) {
		n++
		if t.Fire != nil {
			t.Fire()
		}
	}
	return n
}

// Fired returns the firings so far, in order.
func (s *Schedule) Fired() []Fired { return s.fired }

type timerHeap []*Timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].Deadline != h[j].Deadline {
		return h[i].Deadline < h[j].Deadline
	}
	return h[i].Seq < h[j].Seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*Timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
