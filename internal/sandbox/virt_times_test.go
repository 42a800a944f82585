package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dal-runtime/dal/internal/sysvirt"
)

// timesSource prints times(2)'s return value around a 2 s sleep, and
// whether the CPU times it filled in are the process's and its waited
// child's (getrusage's, in ticks, give or take one).
const timesSource = `
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <unistd.h>

static long ticks(struct timeval a, struct timeval b) {
	return (a.tv_sec + b.tv_sec) * 100 + (a.tv_usec + b.tv_usec) / 10000;
}

int main(void) {
	pid_t pid = fork();
	if (pid == 0) {
		volatile unsigned long x = 0;
		for (unsigned long i = 0; i < 300000000UL; i++)
			x += i;
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	struct tms t;
	memset(&t, 0xff, sizeof t);
	clock_t a = times(&t);
	struct rusage self, children;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	sleep(2);
	clock_t b = times(NULL);
	long cself = ticks(self.ru_utime, self.ru_stime), cchild = ticks(children.ru_utime, children.ru_stime);
	printf("times %ld then %ld\n", (long)a, (long)b);
	printf("self %d children %d busy child %d\n", labs(t.tms_utime + t.tms_stime - cself) <= 2,
	       labs(t.tms_cutime + t.tms_cstime - cchild) <= 2, cchild > 0);
	return 0;
}
`

// TestVirtTimes: in strict mode times(2) returns the virtual monotonic
// clock in ticks — 100 at the run's start (the clock's origin is 1 s),
// 300 after a 2 s sleep — the same in two runs, for C and Python's
// os.times; the CPU times it fills in stay real.
func TestVirtTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "times.c"), filepath.Join(dir, "times")
	if err := os.WriteFile(src, []byte(timesSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cases := []struct{ name, script, want string }{
		{"c", bin, "times 100 then 300\nself 1 children 1 busy child 1\n"},
		{"python", `/usr/bin/python3 -c 'import os, time; a = os.times().elapsed; time.sleep(2); print(a, os.times().elapsed)'`, "1.0 3.0\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, ca := layerScript(t, strictLayer, bin, c.script)
			b, _ := layerScript(t, strictLayer, bin, c.script)
			if a.code != 0 || a.stdout != b.stdout || a.stdout != c.want {
				t.Fatalf("two strict runs of %s: exit %d, stdout\n%s\nthen\n%s\nwant %q, stderr %s", c.name, a.code, a.stdout, b.stdout, c.want, a.stderr)
			}
			if ca.Escapes[sysvirt.Clock] != 0 || ca.Real[sysvirt.CPUClock] == 0 {
				t.Errorf("counts: %d clock escapes, %d real CPU times", ca.Escapes[sysvirt.Clock], ca.Real[sysvirt.CPUClock])
			}
		})
	}
}

// adjtimexSource reads the clock's discipline three ways and tries a
// change no kernel accepts (a tick out of range: EPERM without
// CAP_SYS_TIME, EINVAL with it).
const adjtimexSource = `
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

int main(void) {
	struct timex tx = {0};
	/* glibc's adjtimex is clock_adjtime(CLOCK_REALTIME): the system call
	   of its own, as Go's unix.Adjtimex makes it. */
	int r = syscall(SYS_adjtimex, &tx);
	printf("adjtimex %d time %ld.%06ld status %#x maxerror %ld offset %ld freq %ld\n", r,
	       (long)tx.time.tv_sec, (long)tx.time.tv_usec, tx.status, tx.maxerror, tx.offset, tx.freq);
	struct timex cx = {0};
	r = clock_adjtime(CLOCK_REALTIME, &cx);
	printf("clock_adjtime %d time %ld.%06ld\n", r, (long)cx.time.tv_sec, (long)cx.time.tv_usec);
	struct ntptimeval ntv;
	r = ntp_gettime(&ntv);
	printf("ntp_gettime %d time %ld.%06ld esterror %ld\n", r, (long)ntv.time.tv_sec, (long)ntv.time.tv_usec, ntv.esterror);
	struct timex bad = {.modes = ADJ_TICK, .tick = 1};
	r = adjtimex(&bad);
	printf("change %d %s\n", r, r < 0 && (errno == EPERM || errno == EINVAL) ? "refused" : "accepted");
	return 0;
}
`

// TestVirtAdjtimex: in strict mode a read of the clock's discipline
// (adjtimex, clock_adjtime, glibc's ntp_gettime, which calls
// clock_adjtime) gives the virtual time
// and an unsynchronized clock's state, the same in two runs; a change
// goes to the kernel, which refuses it here.
func TestVirtAdjtimex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "adjtimex.c"), filepath.Join(dir, "adjtimex")
	if err := os.WriteFile(src, []byte(adjtimexSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	a, c := layerScript(t, strictLayer, bin, bin)
	b, _ := layerScript(t, strictLayer, bin, bin)
	// Each read is a realtime read: a microsecond (the quantum) apart.
	want := `adjtimex 5 time 1767225600.000001 status 0x40 maxerror 16000000 offset 0 freq 0
clock_adjtime 5 time 1767225600.000002
ntp_gettime 5 time 1767225600.000003 esterror 16000000
change -1 refused
`
	if a.code != 0 || a.stdout != b.stdout || a.stdout != want {
		t.Fatalf("two strict runs: exit %d, stdout\n%s\nthen\n%s\nwant\n%s\nstderr %s", a.code, a.stdout, b.stdout, want, a.stderr)
	}
	if c.Calls["adjtimex"] != 1 || c.Calls["clock_adjtime"] != 2 || c.Real[sysvirt.ClockAdjust] != 1 || c.Escapes[sysvirt.Clock] != 0 {
		t.Errorf("counts: calls %v, real %v, escapes %v", c.Calls, c.Real, c.Escapes)
	}
}
