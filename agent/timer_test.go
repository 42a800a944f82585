package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// timersProbe runs in a child process (AGENT_TEST_PROBE=timers), a strict
// stream of its own with no in-process dald beside it, and prints what
// happened, with the virtual instants.
func timersProbe() {
	defer Close()
	start := Now()
	var mu sync.Mutex
	var events []string
	note := func(what string) {
		mu.Lock()
		events = append(events, fmt.Sprintf("%s@%v", what, Since(start).Round(time.Millisecond)))
		mu.Unlock()
	}
	AfterFunc(300*time.Millisecond, func() { note("a") })
	AfterFunc(100*time.Millisecond, func() { note("b") })
	AfterFunc(100*time.Millisecond, func() { note("c") })
	stopped := AfterFunc(200*time.Millisecond, func() { note("stopped") })
	if !stopped.Stop() {
		note("stop-missed")
	}
	tk := NewTicker(250 * time.Millisecond)
	tm := NewTimer(time.Second)
	ctx, cancel := WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ticks := 0
	for done := false; !done; {
		select {
		case <-tk.C:
			ticks++
			note(fmt.Sprintf("tick%d", ticks))
			if ticks == 3 {
				tk.Stop()
			}
		case <-tm.C:
			note("timer")
			tm.Reset(2 * time.Second)
		case <-ctx.Done():
			note("ctx:" + fmt.Sprint(errors.Is(ctx.Err(), context.DeadlineExceeded)))
			done = true
		}
	}
	Sleep(500 * time.Millisecond) // passes nothing
	late := NewTimer(100 * time.Millisecond)
	Sleep(time.Second) // passes late's deadline: it fired before Sleep returned
	select {
	case <-late.C:
		note("late")
	default:
		note("late-missing")
	}
	mu.Lock()
	fmt.Println(strings.Join(events, " "))
	mu.Unlock()
}

// TestTimersOnTheVirtualClock: timers, tickers, AfterFunc and WithTimeout
// fire in (deadline, registration) order at virtual instants, the same on
// every run, and a 30 s timeout costs no 30 s of wall time (not asserted:
// the test would just be slow).
func TestTimersOnTheVirtualClock(t *testing.T) {
	probe := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		// GOMAXPROCS=1, as dal's guard rails set it: AfterFunc's
		// functions start in order, each in a goroutine of its own, and
		// with two processors b's and c's could note in either order.
		cmd.Env = append(os.Environ(), "AGENT_TEST_PROBE=timers", "GOMAXPROCS=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || errb.Len() > 0 {
			t.Fatalf("probe: %v %s", err, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	first := probe()
	want := "b@100ms c@100ms tick1@250ms a@300ms tick2@500ms tick3@750ms timer@1s timer@3s timer@5s timer@7s " +
		"timer@9s timer@11s timer@13s timer@15s timer@17s timer@19s timer@21s timer@23s timer@25s timer@27s timer@29s " +
		"ctx:true@30s late@31.5s"
	if first != want {
		t.Fatalf("events\n got %s\nwant %s", first, want)
	}
	if again := probe(); again != first {
		t.Fatalf("second run differs:\n%s\n%s", first, again)
	}
}

func TestGoroutineStates(t *testing.T) {
	for _, c := range []struct {
		status, stack string
		want          int
	}{
		{"running", "", stateBusy},
		{"runnable", "", stateBusy},
		{"chan receive", "", stateIdle},
		{"select", "", stateIdle},
		{"sync.Mutex.Lock", "", stateIdle},
		{"IO wait", "internal/poll.(*FD).Read(...)", stateOutstanding},
		{"IO wait", "internal/poll.(*FD).Accept(0xc000)", stateIdle},
		{"sleep", "", stateOutstanding},
		{"syscall", "os/signal.signal_recv()", stateIdle},
		{"syscall", "syscall.Syscall()", stateBusy},
	} {
		if got := goroutineState(c.status, []byte(c.stack)); got != c.want {
			t.Errorf("%s %q: %d, want %d", c.status, c.stack, got, c.want)
		}
	}
	id, status, ok := parseHeader([]byte("goroutine 17 [chan receive, 3 minutes]:\nmain.main()"))
	if !ok || id != 17 || status != "chan receive" {
		t.Fatalf("parseHeader: %d %q %v", id, status, ok)
	}
}
