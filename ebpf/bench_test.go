//go:build linux && (amd64 || arm64)

package ebpf

import (
	"os"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Benchmarks report ratios against a baseline measured in the same run.
// None of them asserts a time. Run: go test -run '^$' -bench . ./ebpf/

// BenchmarkOpen measures Open (load, verify, attach once); ns/op is Open alone,
// close-ms the detach that follows.
func BenchmarkOpen(b *testing.B) {
	var closing time.Duration
	for b.Loop() {
		tr, err := Open(Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		start := time.Now()
		if err := tr.Close(); err != nil {
			b.Fatal(err)
		}
		closing += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(closing.Milliseconds())/float64(b.N), "close-ms")
}

// emptyHook attaches a program that does nothing to sys_enter: the least
// any syscall hook costs here, the floor the tracer is measured against.
func emptyHook(b *testing.B) (detach func()) {
	prog, err := cebpf.NewProgram(&cebpf.ProgramSpec{
		Type:         cebpf.RawTracepoint,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		b.Fatal(err)
	}
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: prog})
	if err != nil {
		b.Fatal(err)
	}
	return func() { l.Close(); prog.Close() }
}

// BenchmarkSyscall measures getppid in this process, in rounds (one per
// b.N) that each time every state and keep the best of every state: bare
// (no hook); empty-hook (an empty program on sys_enter: what any syscall
// hook costs here, the floor); idle (the tracer open, no session: what
// every process pays while dald runs between sessions); outside (another
// process's session followed, this process in none); tracked (this process
// counted). Run with -benchtime=5x or more.
func BenchmarkSyscall(b *testing.B) {
	const calls = 300000
	timed := func() float64 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := time.Now()
		for range calls {
			unix.Getppid()
		}
		return float64(time.Since(start).Nanoseconds()) / calls
	}
	bare, hook, idle, outside, tracked := 1e9, 1e9, 1e9, 1e9, 1e9
	for b.Loop() {
		bare = min(bare, timed())
		detach := emptyHook(b)
		hook = min(hook, timed())
		detach()

		tr, err := Open(Options{})
		if err != nil {
			b.Fatal(err)
		}
		idle = min(idle, timed())
		other := startGated(b, b.TempDir(), "/bin/true")
		if err := tr.Track(other.cmd.Process.Pid, newSession(), 1); err != nil {
			b.Fatal(err)
		}
		outside = min(outside, timed())
		s := newSession()
		if err := tr.Track(os.Getpid(), s, 0); err != nil {
			b.Fatal(err)
		}
		tracked = min(tracked, timed())
		c, err := tr.Counts(s)
		if err != nil || c.Syscalls["getppid"] < calls {
			b.Fatalf("the tracked loop was not counted: %+v %v", c, err)
		}
		other.run(b)
		tr.Close()
	}
	b.ReportMetric(bare, "bare-ns/syscall")
	b.ReportMetric(hook-bare, "empty-hook-added-ns")
	b.ReportMetric(idle-bare, "idle-added-ns")
	b.ReportMetric(outside-bare, "outside-added-ns")
	b.ReportMetric(tracked-bare, "tracked-added-ns")
	b.ReportMetric(idle/bare, "idle-x")
	b.ReportMetric(tracked/bare, "tracked-x")
	b.ReportMetric(tracked/hook, "tracked-vs-hook-x")
}

var ddSeconds = regexp.MustCompile(`copied, ([0-9.]+) s`)

// dd runs dd bs=1 over count bytes, optionally tracked in a session or
// under strace, and returns the copy time dd reports.
func dd(b *testing.B, tr *Tracer, count int, strace bool) float64 {
	b.Helper()
	argv := []string{"/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=" + strconv.Itoa(count)}
	if strace {
		argv = append([]string{need(b, "/usr/bin/strace"), "-f", "-o", "/dev/null", "--"}, argv...)
	}
	g := startGated(b, b.TempDir(), argv...)
	if tr != nil {
		s := newSession()
		if err := tr.Track(g.cmd.Process.Pid, s, 1); err != nil {
			b.Fatal(err)
		}
		defer tr.Forget(s)
	}
	g.run(b)
	m := ddSeconds.FindStringSubmatch(g.stderr.String())
	if m == nil {
		b.Fatalf("no time in dd's output: %q", g.stderr.String())
	}
	sec, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return sec
}

// BenchmarkDD copies 1,000,000 bytes one byte at a time (two syscalls per
// byte) bare, with an empty program on sys_enter (the floor of any syscall
// hook), with the tracer open and no session (idle), with dd tracked, and
// under strace -f (100,000 bytes, scaled: strace costs ~190x). Times are
// dd's own, the best over b.N rounds.
func BenchmarkDD(b *testing.B) {
	const n = 1000000
	bare, hook, idle, tracked, stracePer := 1e9, 1e9, 1e9, 1e9, 1e9
	for b.Loop() {
		bare = min(bare, dd(b, nil, n, false))
		stracePer = min(stracePer, dd(b, nil, n/10, true)*10)
		detach := emptyHook(b)
		hook = min(hook, dd(b, nil, n, false))
		detach()
		tr, err := Open(Options{})
		if err != nil {
			b.Fatal(err)
		}
		idle = min(idle, dd(b, nil, n, false))
		tracked = min(tracked, dd(b, tr, n, false))
		tr.Close()
	}
	b.ReportMetric(bare, "bare-s")
	b.ReportMetric(hook/bare, "empty-hook-x")
	b.ReportMetric(idle/bare, "idle-x")
	b.ReportMetric(tracked/bare, "tracked-x")
	b.ReportMetric(tracked/hook, "tracked-vs-hook-x")
	b.ReportMetric(stracePer/bare, "strace-x")
	b.ReportMetric((tracked-hook)/(2*n)*1e9, "tracked-over-hook-ns/syscall")
}

// BenchmarkAttach measures what attaching on demand adds to a session's
// start and end: Track of the first session (which attaches the programs)
// against Track while another session is followed, and Forget of the last
// session (which detaches them) against Forget of one of two.
func BenchmarkAttach(b *testing.B) {
	tr := openTracer(b, Options{})
	var first, next, last, oneOfTwo time.Duration
	timed := func(d *time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*d += time.Since(start)
	}
	for b.Loop() {
		g1 := startGated(b, b.TempDir(), "/bin/true")
		g2 := startGated(b, b.TempDir(), "/bin/true")
		s1, s2 := newSession(), newSession()
		timed(&first, func() error { return tr.Track(g1.cmd.Process.Pid, s1, 1) })
		timed(&next, func() error { return tr.Track(g2.cmd.Process.Pid, s2, 1) })
		g1.run(b)
		g2.run(b)
		timed(&oneOfTwo, func() error { return tr.Forget(s1) })
		timed(&last, func() error { return tr.Forget(s2) })
	}
	n := float64(b.N)
	b.ReportMetric(float64(first.Microseconds())/n, "track-attaching-us")
	b.ReportMetric(float64(next.Microseconds())/n, "track-attached-us")
	b.ReportMetric(float64(last.Microseconds())/n, "forget-detaching-us")
	b.ReportMetric(float64(oneOfTwo.Microseconds())/n, "forget-attached-us")
}

// BenchmarkProgramRunTime reads the kernel's BPF run-time statistics: the
// mean time of one sys_enter run for a process outside any session (while
// another process's session keeps the programs attached), for a tracked
// one, and for a tracked openat of /dev/urandom (a ring buffer event per
// call).
func BenchmarkProgramRunTime(b *testing.B) {
	tr := openTracer(b, Options{Stats: true})
	other := startGated(b, b.TempDir(), "/bin/true")
	if err := tr.Track(other.cmd.Process.Pid, newSession(), 1); err != nil {
		b.Fatal(err)
	}
	sysEnter := func() (uint64, time.Duration) {
		st, err := tr.Stats()
		if err != nil {
			b.Fatal(err)
		}
		return st[0].RunCount, st[0].RunTime
	}
	phase := func(name string, f func()) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		n0, t0 := sysEnter()
		for range 200000 {
			f()
		}
		n1, t1 := sysEnter()
		b.ReportMetric(float64(t1-t0)/float64(n1-n0), name+"-ns/run")
	}
	for b.Loop() {
		phase("untracked", func() { unix.Getppid() })
		s := newSession()
		if err := tr.Track(os.Getpid(), s, 0); err != nil {
			b.Fatal(err)
		}
		phase("tracked", func() { unix.Getppid() })
		phase("event", func() {
			fd, err := unix.Open("/dev/urandom", unix.O_RDONLY, 0)
			if err == nil {
				unix.Close(fd)
			}
		})
		if err := tr.Forget(s); err != nil {
			b.Fatal(err)
		}
	}
	if drops, err := tr.Drops(); err == nil {
		b.ReportMetric(float64(drops), "dropped-events")
	}
}

// BenchmarkSessions registers 1,000 sessions, each running a short command
// (echo in a shell: about 30 distinct syscalls), and reports the kernel
// memory of the maps and the cost of reading and forgetting a session.
func BenchmarkSessions(b *testing.B) {
	const sessions = 1000
	for b.Loop() {
		tr, err := Open(Options{})
		if err != nil {
			b.Fatal(err)
		}
		empty, err := tr.MapBytes()
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uint32, sessions)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range ids {
			ids[i] = newSession()
			wg.Add(1)
			sem <- struct{}{}
			go func(s uint32) {
				defer wg.Done()
				defer func() { <-sem }()
				g, err := newGated(os.TempDir(), "/bin/sh", "-c", "echo x >/dev/null")
				if err == nil {
					if err = tr.Track(g.cmd.Process.Pid, s, 1); err == nil {
						err = g.open()
					} else {
						g.kill()
					}
				}
				if err != nil {
					b.Error(err)
				}
			}(ids[i])
		}
		wg.Wait()
		full, err := tr.MapBytes()
		if err != nil {
			b.Fatal(err)
		}
		var entries int
		start := time.Now()
		for _, s := range ids {
			c, err := tr.Counts(s)
			if err != nil {
				b.Fatal(err)
			}
			entries += len(c.Syscalls)
		}
		counts := time.Since(start)
		start = time.Now()
		for _, s := range ids {
			if err := tr.Forget(s); err != nil {
				b.Fatal(err)
			}
		}
		forget := time.Since(start)
		after, err := tr.MapBytes()
		if err != nil {
			b.Fatal(err)
		}
		tr.Close()
		b.ReportMetric(float64(empty)/(1<<20), "maps-MiB-empty")
		b.ReportMetric(float64(full)/(1<<20), "maps-MiB-1000-sessions")
		b.ReportMetric(float64(after)/(1<<20), "maps-MiB-after-forget")
		b.ReportMetric(float64(entries)/sessions, "counters/session")
		b.ReportMetric(float64(counts.Microseconds())/sessions, "counts-us/session")
		b.ReportMetric(float64(forget.Microseconds())/sessions, "forget-us/session")
	}
}
