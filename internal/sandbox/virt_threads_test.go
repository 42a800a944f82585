package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// threadsSource is a C program whose threads sleep and wait with
// timeouts: four workers sleep 10, 20, 30 and 10 ms three times each and
// print the monotonic clock after each sleep; then a condition variable's
// timed wait that nobody signals times out, and one another thread
// signals is woken; then a poll of an eventfd waits behind another
// thread's shorter sleep.
const threadsSource = `#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int flag;
static long long t0;
static int efd;

static long long now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *worker(void *arg) {
	long i = (long)arg;
	for (int k = 0; k < 3; k++) {
		struct timespec ts = {0, (i % 3 + 1) * 10000000L};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&mu);
		printf("worker %ld step %d at %lld ms\n", i, k, (now() - t0) / 1000000);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static void *signaller(void *arg) {
	struct timespec ts = {0, 50000000L};
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&mu);
	flag = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *napper(void *arg) {
	struct timespec ts = {0, 100000000L};
	nanosleep(&ts, NULL);
	printf("napper woke at %lld ms\n", (now() - t0) / 1000000);
	if (arg) {
		uint64_t one = 1;
		write(efd, &one, 8);
	}
	return NULL;
}

int main(void) {
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &a);
	t0 = now();
	pthread_t th[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	printf("workers done at %lld ms\n", (now() - t0) / 1000000);

	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 2;
	pthread_mutex_lock(&mu);
	int r = pthread_cond_timedwait(&cv, &mu, &dl);
	pthread_mutex_unlock(&mu);
	printf("unsignalled timedwait: %s at %lld ms\n", r == ETIMEDOUT ? "ETIMEDOUT" : strerror(r), (now() - t0) / 1000000);

	pthread_t s;
	pthread_create(&s, NULL, signaller, NULL);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(&mu);
	r = 0;
	while (!flag && r == 0)
		r = pthread_cond_timedwait(&cv, &mu, &dl);
	pthread_mutex_unlock(&mu);
	pthread_join(s, NULL);
	printf("signalled timedwait: %s flag=%d at %lld ms\n", r == 0 ? "woken" : strerror(r), flag, (now() - t0) / 1000000);

	/* A poll that nothing but another thread can end waits in the
	 * queue behind that thread's earlier sleep: it times out after it,
	 * or returns when the thread makes it ready. */
	efd = eventfd(0, 0);
	for (long k = 0; k < 2; k++) {
		pthread_t n;
		pthread_create(&n, NULL, napper, (void *)k);
		struct pollfd pfd = {efd, POLLIN};
		int pr = poll(&pfd, 1, 300);
		printf("poll=%d at %lld ms\n", pr, (now() - t0) / 1000000);
		pthread_join(n, NULL);
	}
	return 0;
}
`

// buildC compiles a C source with pthreads into a directory of its own.
func buildC(t testing.TB, name, source string) string {
	t.Helper()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
	if err := os.WriteFile(src, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// burners starts n CPU burners for the rest of the test.
func burners(t *testing.T, n int) {
	t.Helper()
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Process.Kill()
			c.Wait()
		})
	}
}

// TestVirtThreadsSleepOnTheVirtualClock: the sleeps and timed waits of a
// pthread program move its clock, in deadline order, and ten strict runs
// with two CPU burners running print the same bytes.
func TestVirtThreadsSleepOnTheVirtualClock(t *testing.T) {
	bin := buildC(t, "threads", threadsSource)
	burners(t, 2)
	var first string
	for i := range 10 {
		r, c := layerScript(t, strictLayer, bin, bin)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d, stdout\n%s\nstderr %s", i, r.code, r.stdout, r.stderr)
		}
		if n := c.Escapes["stall"]; n > 0 {
			t.Errorf("run %d: %d wait(s) ended on the stall limit: %v", i, n, c.Notes)
		}
		if i == 0 {
			first = r.stdout
			t.Logf("served %v real %v\n%s", c.Served, c.Real, r.stdout)
			continue
		}
		if r.stdout != first {
			t.Fatalf("run %d printed\n%s\nthe first\n%s\nstderr %s", i, r.stdout, first, r.stderr)
		}
	}
	// Worker i sleeps (i%3+1)×10 ms three times: worker 0 and 3 end at
	// 10, 20, 30 ms, worker 1 at 20, 40, 60, worker 2 at 30, 60, 90;
	// ties go in thread order.
	want := []string{
		"worker 0 step 0 at 10 ms", "worker 3 step 0 at 10 ms",
		"worker 0 step 1 at 20 ms", "worker 1 step 0 at 20 ms", "worker 3 step 1 at 20 ms",
		"worker 0 step 2 at 30 ms", "worker 2 step 0 at 30 ms", "worker 3 step 2 at 30 ms",
		"worker 1 step 1 at 40 ms",
		"worker 1 step 2 at 60 ms", "worker 2 step 1 at 60 ms",
		"worker 2 step 2 at 90 ms",
		"workers done at 90 ms",
		"unsignalled timedwait: ETIMEDOUT at 2090 ms",
		"signalled timedwait: woken flag=1 at 2140 ms",
		"napper woke at 2240 ms", "poll=0 at 2440 ms",
		"napper woke at 2540 ms", "poll=1 at 2540 ms",
	}
	if got := strings.Split(strings.TrimSpace(first), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("printed\n%s\nwant\n%s", first, strings.Join(want, "\n"))
	}
}

const javaSleepSource = `public class Sleep {
	public static void main(String[] args) throws Exception {
		if (args.length > 0 && args[0].equals("two")) {
			Thread a = new Thread(() -> { sleep(300); System.out.println("slept 300"); });
			Thread b = new Thread(() -> { sleep(100); System.out.println("slept 100"); });
			a.start();
			b.start();
			a.join();
			b.join();
			return;
		}
		long t0 = System.nanoTime();
		Thread.sleep(1000);
		long t1 = System.nanoTime();
		System.out.println("slept " + (t1 - t0) / 1000000 + " ms");
	}
	static void sleep(long ms) {
		try { Thread.sleep(ms); } catch (InterruptedException e) { throw new RuntimeException(e); }
	}
}
`

// buildJava compiles javaSleepSource into a directory of its own.
func buildJava(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Sleep.java"), []byte(javaSleepSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("javac", "-d", dir, filepath.Join(dir, "Sleep.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return filepath.Join(dir, "Sleep.class")
}

// TestVirtThreadsJavaSleep: Java's Thread.sleep returns in strict mode
// (HotSpot sleeps in a loop of timed futex waits, which did not move the
// clock: it never returned), System.nanoTime shows the second, and two
// threads sleeping 300 and 100 ms print in deadline order.
func TestVirtThreadsJavaSleep(t *testing.T) {
	t.Parallel()
	class := buildJava(t)
	dir := filepath.Dir(class)
	start := time.Now()
	r, c := layerScript(t, strictLayer, class, "timeout 300 java -XX:ActiveProcessorCount=1 -cp "+dir+" Sleep")
	wall := time.Since(start)
	m := regexp.MustCompile(`^slept (\d+) ms\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("Thread.sleep(1000): exit %d, stdout %q, stderr %s, counts %+v", r.code, r.stdout, r.stderr, c)
	}
	if ms, _ := strconv.Atoi(m[1]); ms < 1000 {
		t.Errorf("Thread.sleep(1000) took %d ms of virtual time", ms)
	}
	if n := c.Escapes["stall"]; n > 0 {
		t.Errorf("%d wait(s) ended on the stall limit: %v", n, c.Notes)
	}
	t.Logf("Thread.sleep(1000): %s of virtual time, %v of wall time for the whole JVM; served %v", m[1]+" ms", wall, c.Served)
	for i := range 3 {
		r, _ := layerScript(t, strictLayer, class, "timeout 300 java -XX:ActiveProcessorCount=1 -cp "+dir+" Sleep two")
		if r.code != 0 || r.stdout != "slept 100\nslept 300\n" {
			t.Fatalf("run %d of two sleeping threads: exit %d, stdout %q, stderr %s", i, r.code, r.stdout, r.stderr)
		}
	}
}

const rustSleepSource = `use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let t0 = Instant::now();
    let hs: Vec<_> = (0..4)
        .map(|i| {
            thread::spawn(move || {
                for k in 0..2 {
                    thread::sleep(Duration::from_millis(50));
                    println!("thread {} round {}", i, k);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    println!("elapsed {} ms", t0.elapsed().as_millis());
}
`

// TestVirtThreadsRustEqualSleeps: Rust threads that sleep equally wake in
// thread order, every run, and their sleeps move the clock.
func TestVirtThreadsRustEqualSleeps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "sleep.rs"), filepath.Join(dir, "sleep")
	if err := os.WriteFile(src, []byte(rustSleepSource), 0o644); err != nil {
		t.Fatal(err)
	}
	rustc, err := exec.LookPath("rustc")
	if err != nil {
		rustc = filepath.Join(os.Getenv("HOME"), ".cargo/bin/rustc")
	}
	if out, err := exec.Command(rustc, "-O", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("rustc: %v\n%s", err, out)
	}
	want := "thread 0 round 0\nthread 1 round 0\nthread 2 round 0\nthread 3 round 0\n" +
		"thread 0 round 1\nthread 1 round 1\nthread 2 round 1\nthread 3 round 1\nelapsed 100 ms\n"
	for i := range 5 {
		r, c := layerScript(t, strictLayer, bin, bin)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("run %d: exit %d, stdout\n%s\nwant\n%s\nstderr %s, counts %+v", i, r.code, r.stdout, want, r.stderr, c)
		}
	}
}

// stallSource: mode "spin" has a thread that sleeps 10 ms while another
// spins, without a system call, until the sleeper has woken: the process
// never goes idle, so the sleep can only end on the stall limit. Mode
// "signal" interrupts a held sleep with a signal whose handler has
// SA_RESTART: the restarted sleep keeps its deadline. Mode "io" waits,
// with a timeout, for a thread reading another process's answer.
const stallSource = `#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int woke, caught;

static long long now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *sleeper(void *arg) {
	struct timespec ts = {0, 10000000L};
	if (arg)
		ts.tv_sec = 1, ts.tv_nsec = 0;
	nanosleep(&ts, NULL);
	woke = 1;
	return NULL;
}

static void onsig(int sig) { caught++; }

static int pipefd[2];
static char got[8];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *reader(void *arg) {
	int n = read(pipefd[0], got, sizeof got - 1);
	pthread_mutex_lock(&mu);
	got[n > 0 ? n : 0] = 0;
	woke = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(int argc, char **argv) {
	long long t0 = now();
	pthread_t th;
	if (!strcmp(argv[1], "io")) {
		/* A child computes for 300 ms of CPU time, then answers on a
		 * pipe a thread reads; the main thread waits for the reader
		 * with a 100 ms timeout, which must not expire: the answer is
		 * an event, its latency is not. */
		pipe(pipefd);
		if (fork() == 0) {
			while (clock() < CLOCKS_PER_SEC * 3 / 10)
				;
			write(pipefd[1], "hi", 2);
			_exit(0);
		}
		close(pipefd[1]);
		pthread_create(&th, NULL, reader, NULL);
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += 100000000L;
		if (dl.tv_nsec >= 1000000000L)
			dl.tv_sec++, dl.tv_nsec -= 1000000000L;
		int r = 0;
		pthread_mutex_lock(&mu);
		while (!woke && r == 0)
			r = pthread_cond_timedwait(&cv, &mu, &dl);
		pthread_mutex_unlock(&mu);
		printf("woke=%d r=%s got=%s\n", woke, r ? strerror(r) : "0", got);
		return 0;
	}
	if (!strcmp(argv[1], "spin")) {
		pthread_create(&th, NULL, sleeper, NULL);
		while (!woke)
			;
		pthread_join(th, NULL);
		printf("spun until the sleeper woke\n");
		return 0;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = onsig;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_create(&th, NULL, sleeper, (void *)1);
	struct timespec ts = {0, 300000000L};
	nanosleep(&ts, NULL);
	pthread_kill(th, SIGUSR1);
	pthread_join(th, NULL);
	printf("caught=%d woke=%d at %lld ms\n", caught, woke, (now() - t0) / 1000000);
	return 0;
}
`

// TestVirtThreadsStallLimit: a thread spinning on a sleeper's flag keeps
// its process from ever going idle; the sleep ends on the stall limit,
// counted as an escape with a note naming the spinning thread.
func TestVirtThreadsStallLimit(t *testing.T) {
	t.Parallel()
	bin := buildC(t, "stall", stallSource)
	virt := strictLayer
	virt.StallLimit = 2 * time.Second
	r, c := layerScript(t, virt, bin, bin+" spin")
	if r.code != 0 || r.stdout != "spun until the sleeper woke\n" || c.Escapes["stall"] != 1 {
		t.Fatalf("spin: exit %d, stdout %q, stderr %s, escapes %v", r.code, r.stdout, r.stderr, c.Escapes)
	}
	note := strings.Join(c.Notes, "\n")
	if !strings.Contains(note, "a sleep of thread") || !strings.Contains(note, "ended on the stall limit") || !strings.Contains(note, "(stall) was running") {
		t.Errorf("notes do not say which thread kept the process busy:\n%s", note)
	}
}

// TestVirtThreadsSignalKeepsTheDeadline: a held sleep a signal interrupts
// (its handler has SA_RESTART, so the call is made again) still ends at
// its deadline, every run.
func TestVirtThreadsSignalKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	bin := buildC(t, "stall", stallSource)
	for i := range 3 {
		r, c := layerScript(t, strictLayer, bin, bin+" signal")
		if r.code != 0 || r.stdout != "caught=1 woke=1 at 1000 ms\n" || c.Escapes["stall"] != 0 {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %s, escapes %v", i, r.code, r.stdout, r.stderr, c.Escapes)
		}
	}
}

// sleepLoopSource sleeps argv[2] times for 1 µs: with argv[1] "sleep" in
// a single-threaded process, with "tsleep" while a second thread waits in
// pause(), so each sleep is held on the queue.
const sleepLoopSource = `#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *idle(void *arg) {
	pause();
	return NULL;
}

int main(int argc, char **argv) {
	long n = atol(argv[2]);
	if (!strcmp(argv[1], "tsleep")) {
		pthread_t th;
		pthread_create(&th, NULL, idle, NULL);
	}
	struct timespec ts = {0, 1000};
	for (long i = 0; i < n; i++)
		nanosleep(&ts, NULL);
	printf("%ld\n", n);
	return 0;
}
`

// benchSleep reports a 1 µs nanosleep's cost per call natively and
// under the layer, and their ratio.
func benchSleep(b *testing.B, op string) {
	bin := buildC(b, "sleeploop", sleepLoopSource)
	n := max(b.N, 2000)
	nat, lay := perCall(b, bin, op, n, native), perCall(b, bin, op, n, layered)
	b.ReportMetric(nat, "native-ns/call")
	b.ReportMetric(lay, "layer-ns/call")
	b.ReportMetric(lay, "ns/op")
	if nat > 0 {
		b.ReportMetric(lay/nat, "x-native")
	}
}

// BenchmarkVirtSleep: a single-threaded process's sleep, which the
// supervisor answers at once, moving the clock.
//
//	go test ./internal/sandbox -run '^$' -bench 'VirtSleep|VirtThreadedSleep'
func BenchmarkVirtSleep(b *testing.B) { benchSleep(b, "sleep") }

// BenchmarkVirtThreadedSleep: the sleep of a process whose other thread
// is blocked: held on the queue, answered when the loop finds the process
// idle (two looks at its threads).
func BenchmarkVirtThreadedSleep(b *testing.B) { benchSleep(b, "tsleep") }

// TestVirtThreadsOutstandingIOIsAnEvent: a timed wait for a thread that
// reads a pipe another process answers on, 300 ms of CPU time later, is
// woken by the answer, not timed out after 100 ms of virtual time: the
// reader's outstanding I/O keeps the process from idling, as the answer's
// latency must not decide what the program sees.
func TestVirtThreadsOutstandingIOIsAnEvent(t *testing.T) {
	t.Parallel()
	bin := buildC(t, "stall", stallSource)
	for i := range 2 {
		r, c := layerScript(t, strictLayer, bin, bin+" io")
		if r.code != 0 || r.stdout != "woke=1 r=0 got=hi\n" || c.Escapes["stall"] != 0 {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %s, escapes %v", i, r.code, r.stdout, r.stderr, c.Escapes)
		}
	}
}
