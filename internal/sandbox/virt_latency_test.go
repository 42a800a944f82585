package sandbox

import (
	"strings"
	"testing"
	"time"
)

// latencyProbe waits up to 50 ms for its stdin, a pipe whose writer is
// busy for far longer in real time, then prints what the wait returned and
// how much monotonic time it saw pass.
const latencyProbe = `python3 -c '
import select, time
a = time.monotonic_ns()
r, _, _ = select.select([0], [], [], 0.05)
b = time.monotonic_ns()
print("ready" if r else "timeout", b - a)
'`

// busyWriter writes a line after computing for about half a second of
// real time: no sleep (which strict mode would make instant), so only
// latency stands between the probe and its input.
const busyWriter = `python3 -c '
import time
t = time.perf_counter()
n = 0
while n < 3000000: n += 1
print("x", flush=True)
'`

// TestVirtWaitDoesNotMoveWithLatency: a timed wait whose I/O is
// outstanding is not decided by real time (docs/design.md: virtual time
// is a function of events). The probe's 50 ms select on a pipe whose
// writer answers after far more real time returns the data, with its clock
// unmoved, as it would had the writer been instant; every run alike.
func TestVirtWaitDoesNotMoveWithLatency(t *testing.T) {
	t.Parallel()
	script := busyWriter + " | " + latencyProbe
	var first string
	for i := range 3 {
		r, c := layerScript(t, strictLayer, "", script)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d, stderr %s", i, r.code, r.stderr)
		}
		f := strings.Fields(r.stdout)
		if len(f) != 2 || f[0] != "ready" {
			t.Fatalf("run %d: the probe printed %q, want ready: its wait expired on the real clock while its input was outstanding", i, r.stdout)
		}
		if f[1] == "50000000" || len(f[1]) > 6 {
			t.Errorf("run %d: the probe saw %s ns pass during a wait its input ended, want the quantum's few µs", i, f[1])
		}
		if c.Escapes["stall"] != 0 {
			t.Errorf("run %d: %d stall escapes, want none", i, c.Escapes["stall"])
		}
		if i == 0 {
			first = r.stdout
		} else if r.stdout != first {
			t.Errorf("run %d printed %q, run 0 %q", i, r.stdout, first)
		}
	}
}

// TestVirtWaitStallLimit: a wait on I/O that never comes expires at the
// stall limit, at its own timeout on the virtual clock, and says so: a
// "stall" escape and a note.
func TestVirtWaitStallLimit(t *testing.T) {
	t.Parallel()
	virt := strictLayer
	virt.StallLimit = 300 * time.Millisecond
	// The writer holds the pipe open, computing for seconds, and never
	// writes.
	script := `python3 -c 'n = 0
while n < 40000000: n += 1' | ` + latencyProbe
	r, c := layerScript(t, virt, "", script)
	f := strings.Fields(r.stdout)
	if len(f) != 2 || f[0] != "timeout" || !strings.HasPrefix(f[1], "5000") {
		t.Fatalf("the probe printed %q (stderr %s), want a timeout after 50 ms of virtual time", r.stdout, r.stderr)
	}
	if c.Escapes["stall"] != 1 {
		t.Errorf("%d stall escapes, want 1 (counts %+v)", c.Escapes["stall"], c)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "stall limit") {
		t.Errorf("no note names the stall limit: %q", c.Notes)
	}
}
