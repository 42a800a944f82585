package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// sysinfoSource prints what sysinfo(2) and its glibc callers say, with
// the monotonic (boot) clock read just before and after, and
// /proc/uptime.
const sysinfoSource = `
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

static long long boot(void) {
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
	sleep(atoi(argv[1]));
	long long before = boot();
	struct sysinfo si;
	if (sysinfo(&si) != 0)
		return 1;
	long long after = boot();
	double loads[3];
	int n = getloadavg(loads, 3);
	long phys = sysconf(_SC_PHYS_PAGES), avphys = sysconf(_SC_AVPHYS_PAGES);
	/* Last, a stat the layer answers (fopen's): it is handed over only
	   once the sysinfo calls before it were answered and counted. */
	char up[64] = {0};
	FILE *f = fopen("/proc/uptime", "r");
	if (!f || !fgets(up, sizeof up, f))
		return 2;
	printf("uptime %ld between %lld %lld\n", si.uptime, before, after);
	printf("loads %lu %lu %lu procs %u getloadavg %d %.2f %.2f %.2f\n",
	       si.loads[0], si.loads[1], si.loads[2], si.procs, n, loads[0], loads[1], loads[2]);
	printf("ram %lu %lu %lu %lu swap %lu %lu high %lu %lu unit %u\n", si.totalram, si.freeram,
	       si.sharedram, si.bufferram, si.totalswap, si.freeswap, si.totalhigh, si.freehigh, si.mem_unit);
	printf("pages %ld %ld\n", phys, avphys);
	printf("proc/uptime %s", up);
	return 0;
}
`

// buildSysinfo compiles sysinfoSource, dynamic and -static, into a
// directory of its own.
func buildSysinfo(t *testing.T) (dynamic, static string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "sysinfo.c")
	if err := os.WriteFile(src, []byte(sysinfoSource), 0o644); err != nil {
		t.Fatal(err)
	}
	dynamic, static = filepath.Join(dir, "sysinfo"), filepath.Join(dir, "sysinfo-static")
	for _, args := range [][]string{{"-o", dynamic}, {"-static", "-o", static}} {
		if out, err := exec.Command("gcc", append([]string{"-O2"}, append(args, src)...)...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	return dynamic, static
}

// TestVirtSysinfo: in strict mode sysinfo(2) describes the virtual
// machine of /proc/uptime and /proc/loadavg — uptime on the caller's
// monotonic clock, no load, one process, a fixed share of the machine's
// memory free — the same in two runs, for C dynamic and -static (glibc's
// getloadavg and sysconf(_SC_AVPHYS_PAGES) call it); each call is a clock
// read the layer served.
func TestVirtSysinfo(t *testing.T) {
	t.Parallel()
	dynamic, static := buildSysinfo(t)
	var host unix.Sysinfo_t
	if err := unix.Sysinfo(&host); err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	for _, bin := range []string{dynamic, static} {
		t.Run(filepath.Base(bin), func(t *testing.T) {
			t.Parallel()
			a, ca := layerScript(t, strictLayer, bin, bin+" 3")
			b, _ := layerScript(t, strictLayer, bin, bin+" 3")
			if a.code != 0 || a.stdout != b.stdout {
				t.Fatalf("two strict runs: exit %d, stdout\n%s\nthen\n%s\nstderr %s", a.code, a.stdout, b.stdout, a.stderr)
			}
			var uptime, before, after int64
			var procUp, procIdle float64
			lines := strings.Split(a.stdout, "\n")
			if len(lines) < 5 {
				t.Fatalf("printed\n%s", a.stdout)
			}
			if _, err := fmt.Sscanf(lines[0], "uptime %d between %d %d", &uptime, &before, &after); err != nil {
				t.Fatalf("%q: %v", lines[0], err)
			}
			if _, err := fmt.Sscanf(lines[4], "proc/uptime %f %f", &procUp, &procIdle); err != nil {
				t.Fatalf("%q: %v", lines[4], err)
			}
			// The kernel rounds the boot clock up to whole seconds; the
			// virtual clock is past /proc/uptime's origin by the sleep.
			if !(uptime*1e9 > before && (uptime-1)*1e9 < after) {
				t.Errorf("sysinfo's uptime %d s is not the boot clock (%d..%d ns) rounded up", uptime, before, after)
			}
			if origin := int64(procUp * 1e9); origin != strictLayer.MonoNS || before < origin+3e9 {
				t.Errorf("/proc/uptime says %.2f s, the boot clock %d ns after a 3 s sleep", procUp, before)
			}
			if want := "loads 0 0 0 procs 1 getloadavg 3 0.00 0.00 0.00"; lines[1] != want {
				t.Errorf("got %q, want %q", lines[1], want)
			}
			wantRAM := fmt.Sprintf("ram %d %d 0 0 swap %d %d high %d %d unit %d", host.Totalram, host.Totalram/2,
				host.Totalswap, host.Totalswap, host.Totalhigh, host.Totalhigh/2, host.Unit)
			if lines[2] != wantRAM {
				t.Errorf("got %q, want %q", lines[2], wantRAM)
			}
			unit := int64(host.Unit)
			if want := fmt.Sprintf("pages %d %d", int64(host.Totalram)*unit/page, int64(host.Totalram/2)*unit/page); lines[3] != want {
				t.Errorf("got %q, want %q", lines[3], want)
			}
			// sysinfo, getloadavg, and sysconf's two.
			if n := ca.Calls["sysinfo"]; n != 4 || ca.Escapes[sysvirt.Clock] != 0 {
				t.Errorf("the layer answered %d sysinfo calls (want 4), %d clock escapes", n, ca.Escapes[sysvirt.Clock])
			}
		})
	}
}

// goSysinfoSource prints syscall.Sysinfo's clock and load figures.
const goSysinfoSource = `package main

import (
	"fmt"
	"syscall"
)

func main() {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		panic(err)
	}
	fmt.Println(si.Uptime, si.Loads, si.Procs, si.Freeram == si.Totalram/2)
}
`

// buildGoSysinfo builds goSysinfoSource without cgo, with the go tool of
// the toolchain that built this test.
func buildGoSysinfo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goSysinfoSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gosysinfo\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gosysinfo")
	//lint:ignore SA1019 the go tool of the toolchain that built this test, as in virt_vdso_test.go.
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// nodePath is the node the host runs (a CI's may be outside the
// sandbox's PATH, /usr/local/bin or a version manager's).
func nodePath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v (scripts/test-deps.sh says what to install)", err)
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVirtSysinfoTools: tools that read the load and uptime — procps
// uptime, Python's os.getloadavg, Node's os, Go's syscall.Sysinfo —
// print the same in two strict runs, and what the virtual machine says.
func TestVirtSysinfoTools(t *testing.T) {
	t.Parallel()
	goBin := buildGoSysinfo(t)
	node := nodePath(t)
	cases := []struct{ name, bin, script, want string }{
		{"uptime", "", "uptime", "up 0 min,  0 user,  load average: 0.00, 0.00, 0.00\n"},
		{"python", "", `/usr/bin/python3 -c 'import os; print(os.getloadavg(), os.sysconf("SC_PHYS_PAGES") // os.sysconf("SC_AVPHYS_PAGES"))'`, "(0.0, 0.0, 0.0) 2\n"},
		{"node", "", node + ` -e 'const os = require("os"); console.log(os.uptime(), os.loadavg())'`, "1 [ 0, 0, 0 ]\n"},
		// The runtime's start-up reads the clock: uptime is past 1 s.
		{"go", goBin, goBin, "2 [0 0 0] 1 true\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := strictScript(t, c.bin, c.script)
			b := strictScript(t, c.bin, c.script)
			if a.code != 0 || a.stdout != b.stdout || !strings.HasSuffix(a.stdout, c.want) {
				t.Fatalf("two strict runs of %s: exit %d, stdout\n%s\nthen\n%s\nwant it to end %q, stderr %s", c.name, a.code, a.stdout, b.stdout, c.want, a.stderr)
			}
		})
	}
}

// TestVirtProcMachine: in strict mode /proc/stat and /proc/meminfo are
// the virtual machine's — its boot time on the virtual clock, no CPU
// time but idle, half the memory free as sysinfo says — the same in two
// runs, for cat, procps free and uptime -s, Node's os module and
// Python's os.sysconf (glibc's sysinfo).
func TestVirtProcMachine(t *testing.T) {
	t.Parallel()
	script := `grep -E '^(cpu |btime|procs_running)' /proc/stat; grep -E '^Mem(Total|Free|Available):' /proc/meminfo; free | sed -n 2p
TZ=UTC0 uptime -s
` + nodePath(t) + ` -e 'const os = require("os"); console.log(os.freemem() * 2 === os.totalmem(), os.cpus().map(c => c.times.user + c.times.sys))'
/usr/bin/python3 -c 'import os; print(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024)'`
	a := strictScript(t, "", script)
	b := strictScript(t, "", script)
	if a.code != 0 || a.stdout != b.stdout {
		t.Fatalf("two strict runs: exit %d, stdout\n%s\nthen\n%s\nstderr %s", a.code, a.stdout, b.stdout, a.stderr)
	}
	var host unix.Sysinfo_t
	if err := unix.Sysinfo(&host); err != nil {
		t.Fatal(err)
	}
	totalKB := host.Totalram * uint64(host.Unit) / 1024
	zeros := strings.TrimSuffix(strings.Repeat("0, ", runtime.NumCPU()), ", ")
	boot := time.Unix((strictLayer.EpochNS-strictLayer.MonoNS)/1e9, 0)
	// sysconf's pages of half the memory, in kB.
	pageKB := uint64(os.Getpagesize() / 1024)
	avKB := totalKB / 2 / pageKB * pageKB
	want := fmt.Sprintf(`cpu  0 0 0 100 0 0 0 0 0 0
btime %d
procs_running 1
MemTotal:       %8d kB
MemFree:        %8d kB
MemAvailable:   %8d kB
Mem:        %8d    %8d    %8d           0           0    %8d
%s
true [ %s ]
%d
`, boot.Unix(), totalKB, totalKB/2, totalKB/2, totalKB, totalKB-totalKB/2, totalKB/2, totalKB/2, boot.UTC().Format(time.DateTime), zeros, avKB)
	if a.stdout != want {
		t.Errorf("the virtual machine's /proc:\n%s\nwant\n%s", a.stdout, want)
	}
}
