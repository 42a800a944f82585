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

// TestVirtWaitOnAPipeExpiresAsTheKernels: a timed wait on outstanding
// I/O that dal's proxy does not owe (here a pipe from a busy writer) is
// not held past its timeout: it expires as the kernel's would, moves the
// clock by its timeout, and is counted as real, not as a stall. (A wait
// for a response the proxy owes is held instead: e2e's concurrent and
// stall tests.)
func TestVirtWaitOnAPipeExpiresAsTheKernels(t *testing.T) {
	t.Parallel()
	virt := strictLayer
	virt.StallLimit = 200 * time.Millisecond
	r, c := layerScript(t, virt, "", busyWriter+" | "+latencyProbe)
	f := strings.Fields(r.stdout)
	if r.code != 0 || len(f) != 2 || f[0] != "timeout" || !strings.HasPrefix(f[1], "5000") {
		t.Fatalf("the probe printed %q (exit %d, stderr %s), want a timeout after 50 ms of virtual time", r.stdout, r.code, r.stderr)
	}
	if c.Escapes["stall"] != 0 || c.Real["wait_outstanding"] == 0 {
		t.Errorf("counts %+v: want the wait counted as real (wait_outstanding), no stall", c)
	}
}
