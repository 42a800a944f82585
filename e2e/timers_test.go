package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// timersScript is an agent that uses timers through unmodified tools:
// coreutils timeout (timer_create, sigsuspend), bash's read -t (pselect6
// with a signal mask) and Perl's alarm around sleep.
const timersScript = `date +%s.%N
timeout 5 sleep 10; echo "timeout 5 sleep 10: $?"
timeout 5 sleep 1; echo "timeout 5 sleep 1: $?"
mkfifo f; exec 3<>f; read -t 2 x <&3; echo "read -t 2: $?"
perl -e '$SIG{ALRM} = sub { print "alarm\n" }; alarm 3; print "slept ", sleep(10), "\n"'
date +%s.%N
`

// TestTimersUnderStrictRecord: in a strict record, timers follow the
// virtual clock: two recordings print the same bytes, timeout times out
// exactly when its command outlives it, nothing waits real time for a
// virtual deadline, and a replay is EXACT.
func TestTimersUnderStrictRecord(t *testing.T) {
	t.Parallel()
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "key")}
	dir := t.TempDir()
	record := func(i int) (result, string) {
		ws, out := filepath.Join(dir, "ws"+strconv.Itoa(i)), filepath.Join(dir, "bundle"+strconv.Itoa(i))
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(timersScript), 0o755); err != nil {
			t.Fatal(err)
		}
		r := dalIn(t, ws, key, "record", "--mode", "strict", "--seed", "7", "--no-apply", "--out", out, "--", "bash", "agent.sh")
		if r.code != 0 {
			t.Fatalf("record: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		return r, out
	}
	first, bundle := record(1)
	again, _ := record(2)
	if again.stdout != first.stdout {
		t.Errorf("two recordings differ:\n%s", lineDiff(first.stdout, again.stdout))
	}
	for _, want := range []string{"timeout 5 sleep 10: 124\n", "timeout 5 sleep 1: 0\n", "read -t 2: 142\n", "alarm\n", "slept 3\n"} {
		if !strings.Contains(first.stdout, want) {
			t.Errorf("the agent printed\n%s\nwithout %q", first.stdout, want)
		}
	}
	if lines := strings.Fields(first.stdout); len(lines) < 2 || secondsBetween(t, lines[0], lines[len(lines)-1]) < 10.9 {
		t.Errorf("the agent's clock moved less than 5+1+2+3 s (less what bash's read -t took from its 2 s):\n%s", first.stdout)
	}
	rep := dalIn(t, recordedIn(t, bundle), key, "replay", bundle)
	if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
		t.Errorf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
	}
}
