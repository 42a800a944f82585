package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/sysvirt"
)

// timersSource is a C probe of the timer APIs: each mode arms a timer,
// waits for it and prints what it saw and the time that passed, on the
// monotonic and realtime clocks.
const timersSource = `#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t fired, code, value, timerid;

static void onsig(int sig) { fired++; }

static void oninfo(int sig, siginfo_t *si, void *uc) {
	fired++;
	code = si->si_code;
	value = si->si_value.sival_int;
	timerid = si->si_timerid;
}

static void *idle(void *arg) {
	pause();
	return NULL;
}

static long long now(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void handle(int sig, int info, int flags) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	if (info) {
		sa.sa_sigaction = oninfo;
		sa.sa_flags = SA_SIGINFO | flags;
	} else {
		sa.sa_handler = onsig;
		sa.sa_flags = flags;
	}
	sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
	const char *m = argv[1];
	long long t0 = now(CLOCK_MONOTONIC), r0 = now(CLOCK_REALTIME);
	if (!strcmp(m, "alarm")) {
		handle(SIGALRM, 0, SA_RESTART);
		alarm(2);
		int r = pause();
		printf("pause=%d errno=%d fired=%d\n", r, errno, fired);
	} else if (!strcmp(m, "alarm-sleep")) {
		signal(SIGALRM, onsig);
		alarm(1);
		unsigned left = sleep(5);
		printf("sleep left=%u fired=%d alarm left=%u\n", left, fired, alarm(0));
	} else if (!strcmp(m, "itimer")) {
		handle(SIGALRM, 0, 0);
		struct itimerval it = {{0, 250000}, {0, 500000}}, cur;
		setitimer(ITIMER_REAL, &it, NULL);
		while (fired < 5)
			pause();
		getitimer(ITIMER_REAL, &cur);
		printf("ticks=%d next=%ld.%06ld every=%ld.%06ld\n", fired, cur.it_value.tv_sec, cur.it_value.tv_usec,
		       cur.it_interval.tv_sec, cur.it_interval.tv_usec);
		memset(&it, 0, sizeof it);
		setitimer(ITIMER_REAL, &it, NULL);
	} else if (!strcmp(m, "posix") || !strcmp(m, "posix-abs")) {
		int abs = !strcmp(m, "posix-abs");
		handle(SIGUSR1, 1, SA_RESTART);
		sigset_t block, old;
		sigemptyset(&block);
		sigaddset(&block, SIGUSR1);
		sigprocmask(SIG_BLOCK, &block, &old);
		struct sigevent sev = {0};
		sev.sigev_notify = SIGEV_SIGNAL;
		sev.sigev_signo = SIGUSR1;
		sev.sigev_value.sival_int = 42;
		timer_t t;
		clockid_t c = abs ? CLOCK_REALTIME : CLOCK_MONOTONIC;
		if (timer_create(c, &sev, &t)) {
			perror("timer_create");
			return 1;
		}
		struct itimerspec its = {{0, 0}, {1, 500000000}}, cur;
		if (abs)
			its.it_value.tv_sec = now(CLOCK_REALTIME) / 1000000000LL + 3, its.it_value.tv_nsec = 0;
		timer_settime(t, abs ? TIMER_ABSTIME : 0, &its, NULL);
		timer_gettime(t, &cur);
		printf("armed: %ld.%09ld left\n", cur.it_value.tv_sec, cur.it_value.tv_nsec);
		int r = sigsuspend(&old);
		printf("sigsuspend=%d errno=%d fired=%d code=%d value=%d overrun=%d\n", r, errno, fired, code, value,
		       timer_getoverrun(t));
		timer_delete(t);
	} else if (!strcmp(m, "thread-id")) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGRTMIN);
		sigprocmask(SIG_BLOCK, &set, NULL);
		struct sigevent sev = {0};
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGRTMIN;
		sev._sigev_un._tid = gettid();
		sev.sigev_value.sival_int = 7;
		timer_t t;
		timer_create(CLOCK_BOOTTIME, &sev, &t);
		struct itimerspec its = {{0, 0}, {4, 0}};
		timer_settime(t, 0, &its, NULL);
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		printf("sigwaitinfo=%d rtmin+%d code=%d value=%d\n", sig, sig - SIGRTMIN, si.si_code, si.si_value.sival_int);
	} else if (!strcmp(m, "timerfd")) {
		int fd = timerfd_create(CLOCK_MONOTONIC, 0);
		struct itimerspec its = {{0, 300000000}, {0, 700000000}}, cur;
		timerfd_settime(fd, 0, &its, NULL);
		timerfd_gettime(fd, &cur);
		printf("armed: %ld.%09ld left\n", cur.it_value.tv_sec, cur.it_value.tv_nsec);
		struct pollfd p = {fd, POLLIN};
		int n = poll(&p, 1, -1);
		uint64_t ticks = 0;
		read(fd, &ticks, 8);
		printf("poll=%d ticks=%llu\n", n, (unsigned long long)ticks);
		struct timespec ts = {1, 0};
		nanosleep(&ts, NULL); /* three more expire meanwhile */
		n = poll(&p, 1, 5000);
		read(fd, &ticks, 8);
		printf("poll=%d ticks=%llu\n", n, (unsigned long long)ticks);
	} else if (!strcmp(m, "timerfd-read")) {
		int fd = timerfd_create(CLOCK_BOOTTIME, 0);
		struct itimerspec its = {{0, 0}, {2, 500000000}};
		timerfd_settime(fd, 0, &its, NULL);
		uint64_t ticks = 0;
		read(fd, &ticks, 8);
		printf("read ticks=%llu\n", (unsigned long long)ticks);
	} else if (!strcmp(m, "timerfd-select")) {
		int fd = timerfd_create(CLOCK_MONOTONIC, 0);
		struct itimerspec its = {{0, 0}, {0, 900000000}};
		timerfd_settime(fd, 0, &its, NULL);
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		int n = select(fd + 1, &rd, NULL, NULL, NULL);
		printf("select=%d ready=%d\n", n, FD_ISSET(fd, &rd) != 0);
	} else if (!strcmp(m, "timerfd-abs")) {
		int fd = timerfd_create(CLOCK_REALTIME, 0);
		struct itimerspec its = {{0, 0}, {now(CLOCK_REALTIME) / 1000000000LL + 60, 0}};
		timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL);
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		struct timeval tv = {3600, 0};
		int n = select(fd + 1, &rd, NULL, NULL, &tv);
		uint64_t ticks = 0;
		read(fd, &ticks, 8);
		printf("select=%d ticks=%llu\n", n, (unsigned long long)ticks);
	} else if (!strcmp(m, "epoll")) {
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
		struct itimerspec its = {{0, 100000000}, {0, 100000000}};
		timerfd_settime(fd, 0, &its, NULL);
		int ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		uint64_t total = 0;
		for (int i = 0; i < 5; i++) {
			int n = epoll_wait(ep, &ev, 1, -1);
			uint64_t ticks = 0;
			read(fd, &ticks, 8);
			total += ticks;
			printf("epoll_wait=%d ticks=%llu at %lld\n", n, (unsigned long long)ticks, now(CLOCK_MONOTONIC) - t0);
		}
		printf("total=%llu\n", (unsigned long long)total);
	} else if (!strcmp(m, "threaded-abs")) {
		pthread_t th;
		pthread_create(&th, NULL, idle, NULL);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		struct sigevent sev = {0};
		sev.sigev_notify = SIGEV_SIGNAL;
		sev.sigev_signo = SIGUSR1;
		timer_t t;
		timer_create(CLOCK_REALTIME, &sev, &t);
		struct itimerspec its = {{0, 0}, {now(CLOCK_REALTIME) / 1000000000LL + 1, 0}};
		timer_settime(t, TIMER_ABSTIME, &its, NULL);
		printf("sigwaitinfo=%d\n", sigwaitinfo(&set, NULL) == SIGUSR1);
		return 0;
	} else if (!strcmp(m, "settime") || !strcmp(m, "gettime")) {
		/* The benchmarks' loop: argv[2] calls. */
		long n = atol(argv[2]);
		struct sigevent sev = {0};
		sev.sigev_notify = SIGEV_NONE;
		timer_t t;
		timer_create(CLOCK_MONOTONIC, &sev, &t);
		struct itimerspec its = {{0, 0}, {3600, 0}}, cur;
		timer_settime(t, 0, &its, NULL);
		long acc = 0;
		for (long i = 0; i < n; i++) {
			if (m[0] == 's')
				timer_settime(t, 0, &its, NULL);
			else
				timer_gettime(t, &cur), acc += cur.it_value.tv_sec;
		}
		printf("%ld\n", acc);
		return 0;
	} else if (!strcmp(m, "ready")) {
		/* The benchmarks' loop: argv[2] untimed epoll_waits, each
		 * ready at once (an eventfd that stays readable). */
		long n = atol(argv[2]), acc = 0;
		int efd = eventfd(1, 0), ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLIN};
		epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
		for (long i = 0; i < n; i++)
			acc += epoll_wait(ep, &ev, 1, -1);
		printf("%ld\n", acc);
		return 0;
	} else if (!strcmp(m, "busy")) {
		signal(SIGALRM, onsig);
		alarm(1);
		while (!fired)
			;
		printf("fired=%d\n", fired);
	} else {
		return 2;
	}
	printf("elapsed mono=%lld real=%lld\n", now(CLOCK_MONOTONIC) - t0, now(CLOCK_REALTIME) - r0);
	return 0;
}
`

// buildTimers compiles timersSource into a directory of its own.
func buildTimers(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "timers.c"), filepath.Join(dir, "timers")
	if err := os.WriteFile(src, []byte(timersSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// strictScript runs script in a strict sandbox with the directory of bin
// bound, and returns its result. A timer that fired on the real clock
// fails the test.
func strictScript(t *testing.T, bin, script string) result {
	t.Helper()
	r, c := layerScript(t, strictLayer, bin, script)
	if n := c.Escapes[sysvirt.Timer]; n > 0 {
		t.Errorf("%s: %d timer(s) fired on the real clock", script, n)
	}
	return r
}

// layerScript runs script in a sandbox under virt with the directory of
// bin bound, and returns its result and what the layer counted.
func layerScript(t *testing.T, virt sysvirt.Config, bin, script string) (result, sysvirt.Counts) {
	t.Helper()
	cfg := newConfig(t, nil)
	if bin != "" {
		cfg.Binds = []string{filepath.Dir(bin)}
	}
	cfg.Virtual = virt
	r := run(t, cfg, script)
	c, _, err := Virtualized(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// TestVirtTimersFollowTheVirtualClock: in strict mode every timer API
// expires on the process's virtual clock, at once in real time, and two
// runs print the same bytes.
func TestVirtTimersFollowTheVirtualClock(t *testing.T) {
	t.Parallel()
	bin := buildTimers(t)
	cases := []struct {
		mode string
		want []string // lines the run must print
	}{
		{"alarm", []string{"pause=-1 errno=4 fired=1", "elapsed mono=2000"}},
		{"alarm-sleep", []string{"sleep left=4 fired=1 alarm left=0", "elapsed mono=1000"}},
		{"itimer", []string{"ticks=5 next=0.250000 every=0.250000", "elapsed mono=1500"}},
		{"posix", []string{"armed: 1.500000000 left", "sigsuspend=-1 errno=4 fired=1 code=-2 value=42 overrun=0", "elapsed mono=1500"}},
		{"posix-abs", []string{"sigsuspend=-1 errno=4 fired=1 code=-2 value=42 overrun=0", "elapsed mono=3000"}},
		{"thread-id", []string{"sigwaitinfo=34 rtmin+0 code=-2 value=7", "elapsed mono=4000"}},
		{"timerfd", []string{"armed: 0.700000000 left", "poll=1 ticks=1", "poll=1 ticks=3", "elapsed mono=1700"}},
		{"timerfd-read", []string{"read ticks=1", "elapsed mono=2500"}},
		{"timerfd-select", []string{"select=1 ready=1", "elapsed mono=900"}},
		{"timerfd-abs", []string{"select=1 ticks=1", "elapsed mono=60000"}},
		{"epoll", []string{"epoll_wait=1 ticks=1 at 100", "epoll_wait=1 ticks=1 at 500", "total=5", "elapsed mono=500"}},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			a := strictScript(t, bin, bin+" "+c.mode)
			b := strictScript(t, bin, bin+" "+c.mode)
			if a.code != 0 || a.stdout != b.stdout {
				t.Fatalf("two strict runs of %s: exit %d, stdout\n%s\nthen\n%s\nstderr %s", c.mode, a.code, a.stdout, b.stdout, a.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(a.stdout, w) {
					t.Errorf("%s printed\n%s\nwithout %q", c.mode, a.stdout, w)
				}
			}
		})
	}
}

// TestVirtTimersTimeout: coreutils timeout (timer_create, then
// sigsuspend until its command ends) times out a command that sleeps past
// its limit and not one that ends first, at once, on the virtual clock.
func TestVirtTimersTimeout(t *testing.T) {
	t.Parallel()
	script := `date +%s.%N; timeout 5 sleep 10; echo $?; date +%s.%N; timeout 5 sleep 1; echo $?; date +%s.%N`
	a := strictScript(t, "", script)
	b := strictScript(t, "", script)
	lines := strings.Fields(a.stdout)
	if a.code != 0 || a.stdout != b.stdout || len(lines) != 5 || lines[1] != "124" || lines[3] != "0" {
		t.Fatalf("two strict runs of %q: exit %d, stdout\n%s\nthen\n%s\nstderr %s", script, a.code, a.stdout, b.stdout, a.stderr)
	}
	if !strings.HasPrefix(lines[2], "1767225605.") || !strings.HasPrefix(lines[4], "1767225606.") {
		t.Errorf("timeout 5 sleep 10 then timeout 5 sleep 1 took the shell from %s to %s then %s, want 5 s then 1 s", lines[0], lines[2], lines[4])
	}
}

// TestVirtTimersBashReadTimeout: bash's read -t (pselect6 with a signal
// mask) on a FIFO nothing else writes times out at once, two seconds
// later on the virtual clock (less what bash's own clock reads took).
func TestVirtTimersBashReadTimeout(t *testing.T) {
	t.Parallel()
	script := `mkfifo f; exec 3<>f; date +%s.%N; read -t 2 x <&3; echo $?; date +%s.%N`
	cfg := newConfig(t, nil)
	cfg.Virtual = strictLayer
	a := run(t, cfg, "exec bash -c '"+script+"'")
	lines := strings.Fields(a.stdout)
	if a.code != 0 || len(lines) != 3 || lines[1] != "142" || !strings.HasPrefix(lines[2], "1767225601.999") {
		t.Fatalf("%s: exit %d, stdout\n%s\nstderr %s", script, a.code, a.stdout, a.stderr)
	}
}

// TestVirtTimersBusyLoopBackstop: a process that never waits for its
// alarm still gets it, on the real clock, and the layer counts the fire
// as an escape.
func TestVirtTimersBusyLoopBackstop(t *testing.T) {
	t.Parallel()
	bin := buildTimers(t)
	r, c := layerScript(t, strictLayer, bin, bin+" busy")
	if r.code != 0 || !strings.Contains(r.stdout, "fired=1") || c.Escapes[sysvirt.Timer] != 1 {
		t.Fatalf("busy loop with alarm(1): exit %d, stdout %q, escapes %v", r.code, r.stdout, c.Escapes)
	}
}

// TestVirtTimersSeededStayReal: in seeded mode the clock is real, and so
// are timers: an alarm interrupts a real sleep.
func TestVirtTimersSeededStayReal(t *testing.T) {
	t.Parallel()
	bin := buildTimers(t)
	r, c := layerScript(t, sysvirt.Config{Random: true, Seed: 1}, bin, bin+" alarm-sleep")
	if r.code != 0 || !strings.Contains(r.stdout, "fired=1 alarm left=0") || c.Served[sysvirt.Timer] != 0 {
		t.Fatalf("seeded alarm-sleep: exit %d, stdout %q, served %v", r.code, r.stdout, c.Served)
	}
}

// TestVirtTimersThreadedAbsolute: a process with several threads waits
// for its timers in real time (its waits do not jump), so an absolute
// deadline on its virtual clock is kept at the same distance on the real
// one: one second, not the months between the virtual epoch and now. The
// fire is counted as an escape.
func TestVirtTimersThreadedAbsolute(t *testing.T) {
	t.Parallel()
	bin := buildTimers(t)
	r, c := layerScript(t, strictLayer, bin, bin+" threaded-abs")
	if r.code != 0 || r.stdout != "sigwaitinfo=1\n" || c.Escapes[sysvirt.Timer] != 1 {
		t.Fatalf("threaded absolute timer: exit %d, stdout %q, escapes %v", r.code, r.stdout, c.Escapes)
	}
}

// BenchmarkVirtTimerSettime: timer_settime answered by the supervisor
// against the kernel's, per call.
//
//	go test ./internal/sandbox -run '^$' -bench 'VirtTimer' -benchtime 2s
func BenchmarkVirtTimerSettime(b *testing.B) {
	benchTimers(b, "settime")
}

// BenchmarkVirtUntimedWaitReady: an untimed epoll_wait that is ready at
// once: the filter lets it through (a process's watcher finds the untimed
// waits a timer ends), at the filter's cost.
func BenchmarkVirtUntimedWaitReady(b *testing.B) {
	benchTimers(b, "ready")
}

// BenchmarkVirtTimerGettime: timer_gettime likewise.
func BenchmarkVirtTimerGettime(b *testing.B) {
	benchTimers(b, "gettime")
}

func benchTimers(b *testing.B, op string) {
	bin := buildTimers(b)
	n := max(b.N, 20000)
	nat, layer := perCall(b, bin, op, n, inBox), perCall(b, bin, op, n, layered)
	b.ReportMetric(nat, "sandbox-ns/call")
	b.ReportMetric(layer, "ns/op")
}

// TestVirtTimersScripts: Python's signal.alarm and setitimer around
// time.sleep (clock_nanosleep with TIMER_ABSTIME, retried after the
// handler, PEP 475) and Perl's alarm around sleep, on the virtual clock.
func TestVirtTimersScripts(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, script, want string }{
		{"python", `/usr/bin/python3 -c '
import signal, time
fired = []
signal.signal(signal.SIGALRM, lambda *a: fired.append(time.monotonic()))
t = time.monotonic()
signal.alarm(2)
time.sleep(5)
signal.setitimer(signal.ITIMER_REAL, 0.25, 0.25)
while len(fired) < 4:
    signal.pause()
signal.setitimer(signal.ITIMER_REAL, 0)
print([round(f - t, 3) for f in fired], round(time.monotonic() - t, 3))
'`, "[2.0, 5.25, 5.5, 5.75] 5.75"},
		{"perl", `perl -e '$SIG{ALRM} = sub { print "alarm\n" }; alarm 3; $left = sleep 10; print "slept $left\n"'`, "alarm\nslept 3\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := strictScript(t, "", c.script)
			b := strictScript(t, "", c.script)
			if a.code != 0 || a.stdout != b.stdout || !strings.HasPrefix(a.stdout, c.want) {
				t.Fatalf("two strict runs of %s: exit %d, stdout\n%s\nthen\n%s\nwant %q, stderr %s", c.name, a.code, a.stdout, b.stdout, c.want, a.stderr)
			}
		})
	}
}
