package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// batchPolicy puts the calling thread, and so what it forks next, under
// SCHED_BATCH (on) or back under SCHED_OTHER (off), at its nice value.
//
// A batch thread that wakes another does not give up its CPU to it: the
// woken thread runs when the waker blocks or its slice ends. On the one CPU
// a strict run pins the agent to, that makes the hand-offs between a
// process's threads happen in the order its code makes them, not in the
// order the kernel's wake-up preemption picks from real run times. The Go
// runtime is the case that needs it: the main goroutine is locked to the
// main thread during package initialisation, and every time it blocks the
// main thread starts or wakes another thread to run the runtime's
// goroutines; whether that thread was already idle again or a new one had
// to be made decided whether the main thread's random state was drawn once
// more (a new thread's seed is taken from its maker's generator), and so a
// program's map order and math/rand/v2 values took one of two values from
// run to run (7 of 10 runs alike; 16 of 16 and 30 of 30 under load with
// it). What is left is a time slice ending inside a hand-off, which other
// work on the CPU makes likelier: none of 1,500 runs one at a time, 4 of
// 2,320 with six to eight runs at once on two CPUs. A longer slice for the agent
// (sched_attr's runtime, 100 ms) made it worse, 22 of 1,500 one at a time:
// a waking task with a shorter slice preempts the running one.
//
// Unprivileged threads may switch between the two policies, so it works
// rootless too.
func batchPolicy(on bool) error {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return fmt.Errorf("sandbox: read the scheduling policy: %v", err)
	}
	attr.Policy = unix.SCHED_NORMAL
	if on {
		attr.Policy = unix.SCHED_BATCH
	}
	attr.Flags = 0
	if err := unix.SchedSetAttr(0, attr, 0); err != nil {
		return fmt.Errorf("sandbox: set the agent's scheduling policy to SCHED_BATCH: %v", err)
	}
	return nil
}
