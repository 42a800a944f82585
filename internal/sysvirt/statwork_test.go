package sysvirt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkStatWork is the supervisor's own work for one stat it serves,
// without the seccomp round trip: statFor for the calls find and git make
// (a name relative to a directory descriptor, fstat, a name relative to
// the working directory, an absolute path), with this process as the
// caller, and the kernel's own stat of the same file for comparison. The
// serve_thread variants run where the supervisor's notifications are
// received (Supervisor.ServeThread), whose walks need no capset. cpu-ns/op
// is the thread's CPU time a call, steadier than wall time on a shared
// machine.
func BenchmarkStatWork(b *testing.B) {
	dir := b.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(dirfd)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(dir); err != nil {
		b.Fatal(err)
	}
	s := New(Config{Clock: true, StartNS: testStart}, -1)
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(pidfd)
	cstr := func(s string) uint64 {
		p := append([]byte(s), 0)
		keep = append(keep, p)
		return uint64(uintptr(unsafe.Pointer(&p[0])))
	}
	var out unix.Stat_t
	buf := uint64(uintptr(unsafe.Pointer(&out)))
	for _, c := range []struct {
		name string
		c    statCall
	}{
		{"dirfd", statCall{dirfd: int32(dirfd), path: cstr("f"), flags: unix.AT_SYMLINK_NOFOLLOW, buf: buf}},
		{"fstat", statCall{dirfd: int32(dirfd), flags: unix.AT_EMPTY_PATH, buf: buf}},
		{"cwd", statCall{dirfd: unix.AT_FDCWD, path: cstr("f"), buf: buf}},
		{"abs", statCall{dirfd: unix.AT_FDCWD, path: cstr(file), buf: buf}},
	} {
		for _, serve := range []bool{false, true} {
			name := c.name
			if serve {
				name += "/serve_thread"
			}
			b.Run(name, func(b *testing.B) {
				if serve {
					defer s.ServeThread()()
				}
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				v := callerView{tgid: os.Getpid(), same: true, pidfd: pidfd}
				var st unix.Statx_t
				cpu := threadCPU()
				for b.Loop() {
					if _, ok := s.statFor(os.Getpid(), c.c, &v, &st); !ok {
						b.Fatal("statFor failed")
					}
				}
				b.ReportMetric(float64(threadCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
	b.Run("kernel", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var st unix.Stat_t
		cpu := threadCPU()
		for b.Loop() {
			unix.Fstatat(dirfd, "f", &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		b.ReportMetric(float64(threadCPU()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// keep holds the benchmark's paths, whose addresses it hands out.
var keep [][]byte

// threadCPU is the calling thread's CPU time in ns: what a benchmark's
// work cost it, whatever else the machine runs meanwhile.
func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

// BenchmarkSIGSYSTrap measures what the in-process design of
// docs/design.md §3.2 would pay a call: a trap into a SIGSYS handler
// (SECCOMP_RET_TRAP) and back, alone (getppid answered by the handler)
// and around a real newfstatat the handler makes (testdata/trapcost.c, a
// C program built with gcc), each against the call made plainly.
func BenchmarkSIGSYSTrap(b *testing.B) {
	dir := b.TempDir()
	prog := filepath.Join(dir, "trapcost")
	if out, err := exec.Command("gcc", "-O2", "-o", prog, "testdata/trapcost.c").CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, out)
	}
	sum := map[string]float64{}
	for b.Loop() {
		cmd := exec.Command(prog, "200000")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("trapcost: %v\n%s", err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var name string
			var ns float64
			if _, err := fmt.Sscan(line, &name, &ns); err != nil {
				b.Fatalf("trapcost printed %q: %v", line, err)
			}
			sum[name] += ns
		}
	}
	for name, ns := range sum {
		b.ReportMetric(ns/float64(b.N), name+"-ns/call")
	}
}
