package sysvirt

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"time"
)

// Settled waits until every thread of the agent's tree is blocked in a
// wait that only an event from outside the tree can end (a response on a
// socket, a child's exit the tracer has not seen yet counts as running),
// and none has run meanwhile, or until ctx ends (false). The proxy calls
// it before it hands the tree its next response, so that what the agent
// does with each response starts from the same state, whatever the
// network's latency (docs/design.md §3.1).
//
// A thread is settled as [Supervisor.settled] judges it (asleep, not in
// uninterruptible sleep, not stopped for the tracer, not held for an
// answer the supervisor has not decided, not in a call it answers at
// once); a process's quiet thread (Go's sysmon, quiet.go) is not looked
// at. Two looks a little apart must agree and find that no thread was
// scheduled between them (/proc/<tid>/schedstat's count of runs): a
// thread woken while the first look went by would otherwise pass.
func (s *Supervisor) Settled(ctx context.Context) bool {
	wait := 20 * time.Microsecond
	for {
		if a, ok := s.treeLook(); ok {
			time.Sleep(20 * time.Microsecond)
			if b, ok := s.treeLook(); ok && bytes.Equal(a, b) {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Millisecond)
	}
}

// treeLook reports whether every traced process is settled, with the
// run counts of all their threads.
func (s *Supervisor) treeLook() ([]byte, bool) {
	type look struct{ tgid, quiet int }
	s.mu.Lock()
	procs := make([]look, 0, len(s.procs))
	for _, p := range s.procs {
		if !p.ended {
			procs = append(procs, look{p.tgid, p.quiet})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(procs, func(a, b look) int { return a.tgid - b.tgid })
	var runs []byte
	for _, p := range procs {
		if !blocked(p.tgid, -1, p.quiet, s.heldIdle) {
			return nil, false
		}
		dir := "/proc/" + strconv.Itoa(p.tgid) + "/task"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Name() == strconv.Itoa(p.quiet) {
				continue
			}
			b, err := readFile(dir + "/" + e.Name() + "/schedstat")
			if err != nil {
				continue
			}
			// runtime, wait time, runs: the last counts every time the
			// thread was put on a CPU.
			if f := bytes.Fields(b); len(f) == 3 {
				runs = append(runs, e.Name()...)
				runs = append(runs, ':')
				runs = append(runs, f[2]...)
				runs = append(runs, ' ')
			}
		}
	}
	return runs, true
}
