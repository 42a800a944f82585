package sysvirt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/seccompbpf"
	"golang.org/x/sys/unix"
)

// kernelNumbers reads the system call numbers of this architecture from the
// C library's headers (gcc -dM -E of <sys/syscall.h>), by name.
func kernelNumbers(t *testing.T) map[string]int {
	t.Helper()
	cmd := exec.Command("gcc", "-dM", "-E", "-")
	cmd.Stdin = strings.NewReader("#include <sys/syscall.h>\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gcc -dM -E <sys/syscall.h> (gcc and the C library's headers are test dependencies): %v", err)
	}
	nrs := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "#define" || !strings.HasPrefix(f[1], "__NR_") {
			continue
		}
		if n, err := strconv.Atoi(f[2]); err == nil {
			nrs[strings.TrimPrefix(f[1], "__NR_")] = n
		}
	}
	if len(nrs) < 200 {
		t.Fatalf("<sys/syscall.h> defines %d system call numbers: not the kernel's table", len(nrs))
	}
	return nrs
}

// TestTableRows: each row names a call by the kernel's name and number on
// this architecture (or is left out where the ABI lacks the call), has a
// handler and a category, and Handle's lookup finds it by its number.
func TestTableRows(t *testing.T) {
	kernel := kernelNumbers(t)
	names := map[string]bool{}
	for _, c := range table {
		if names[c.name] {
			t.Errorf("%s has two rows", c.name)
		}
		names[c.name] = true
		want, has := kernel[c.name]
		switch {
		case c.nr < 0 && has:
			t.Errorf("%s is left out of this architecture's table, but the kernel has it as %d", c.name, want)
		case c.nr >= 0 && !has:
			t.Errorf("%s is number %d here, but the kernel has no such call", c.name, c.nr)
		case c.nr >= 0 && c.nr != want:
			t.Errorf("%s is number %d in the table, %d in the kernel's", c.name, c.nr, want)
		}
		if c.handle == nil {
			t.Errorf("%s has no handler", c.name)
		}
		switch c.category {
		case Clock, Sleep, Wait, Random, Deadline, Timer, FileTimes, Port:
		default:
			t.Errorf("%s has category %q, which no call serves", c.name, c.category)
		}
		if c.nr < 0 {
			continue
		}
		if got := served(int32(c.nr)); got == nil || got.name != c.name {
			t.Errorf("number %d dispatches to %v, want %s", c.nr, got, c.name)
		}
		if got := callName(c.nr); got != c.name {
			t.Errorf("number %d is counted as %q, want %q", c.nr, got, c.name)
		}
	}
	for _, nr := range []int32{-1, unix.SYS_GETPPID, unix.SYS_READ, maxNr, 1 << 30} {
		if c := served(nr); c != nil {
			t.Errorf("number %d dispatches to %s, which does not serve it", nr, c.name)
		}
	}
	if got := callName(unix.SYS_MMAP); got != "mmap" {
		t.Errorf("mmap (injected at exec) is counted as %q", got)
	}
	if got := callName(unix.SYS_GETPPID); got != "syscall_"+strconv.Itoa(unix.SYS_GETPPID) {
		t.Errorf("getppid is counted as %q", got)
	}
}

// TestRulesFromTable: each part of the layer filters the rows of its
// categories, in the table's order, with the row's condition.
func TestRulesFromTable(t *testing.T) {
	for _, cfg := range []Config{{}, {Clock: true}, {Random: true}, {Clock: true, Random: true}} {
		var want []Rule
		for _, c := range table {
			on := (c.category == Random && cfg.Random) || (c.category != Random && cfg.Clock)
			if on && c.nr >= 0 {
				want = append(want, Rule{Nr: c.nr, Cond: c.when.cond, Arg: c.when.arg, In: c.when.in})
			}
		}
		if got := Rules(cfg); !reflect.DeepEqual(got, want) {
			t.Errorf("Rules(%+v) = %+v, want %+v", cfg, got, want)
		}
	}
	if r := Rules(Config{Random: true}); len(r) != 1 || r[0].Nr != unix.SYS_GETRANDOM {
		t.Errorf("seeded mode filters %+v, want getrandom alone", r)
	}
}

// runBPF runs prog on call (nr, args) as seccomp would and returns its
// verdict, or fallthrough when it runs past its end (the next part of the
// sandbox's filter then decides).
func runBPF(t *testing.T, prog []unix.SockFilter, nr int, args [6]uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[seccompbpf.OffNr:], uint32(nr))
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[seccompbpf.OffArgs+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		switch ins.Code {
		case seccompbpf.LdAbsW:
			acc = binary.LittleEndian.Uint32(data[ins.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= ins.K
		case seccompbpf.JeqK, seccompbpf.JsetK:
			taken := acc == ins.K
			if ins.Code == seccompbpf.JsetK {
				taken = acc&ins.K != 0
			}
			if taken {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case seccompbpf.RetK:
			return ins.K
		default:
			t.Fatalf("pc %d: instruction %#x", pc, ins.Code)
		}
	}
	return ranOff
}

const ranOff = 0xffff_fffe

// TestFilterFromTable runs the strict layer's filter, derived from the
// table, on each row's calls: the invocations its condition takes go to
// the supervisor, the others run, and a call of no row falls through.
func TestFilterFromTable(t *testing.T) {
	prog := Filter(Rules(Config{Clock: true, Random: true}))
	with := func(i int, v uint64) (a [6]uint64) {
		a[i] = v
		return a
	}
	for _, c := range table {
		if c.nr < 0 {
			continue
		}
		var notify, allow [][6]uint64
		w := c.when
		switch w.cond {
		case CondAlways:
			notify = append(notify, [6]uint64{}, [6]uint64{1, 2, 3, 4, 5, 6})
		case CondPositive:
			notify = append(notify, with(w.arg, 1), with(w.arg, 1<<31-1))
			allow = append(allow, with(w.arg, 0), with(w.arg, 0xffffffff), with(w.arg, 1<<31))
		case CondNonNull:
			notify = append(notify, with(w.arg, 0x7ffc0000), with(w.arg, 0x7ffc_0000_0000))
			allow = append(allow, with(w.arg, 0))
		case CondIn:
			for _, v := range w.in {
				notify = append(notify, with(w.arg, uint64(v)))
			}
			allow = append(allow, with(w.arg, clockProcessCPU), with(w.arg, 0xfffffffa))
		case CondFutex:
			for _, op := range w.in {
				a := with(1, uint64(op)|128) // FUTEX_PRIVATE_FLAG
				a[3] = 0x7ffc0000
				notify = append(notify, a)
				allow = append(allow, with(1, uint64(op)))
			}
			allow = append(allow, with(1, 1)) // FUTEX_WAKE
		default:
			t.Fatalf("%s: condition %d", c.name, w.cond)
		}
		for _, a := range notify {
			if v := runBPF(t, prog, c.nr, a); v != unix.SECCOMP_RET_USER_NOTIF {
				t.Errorf("%s%x: verdict %#x, want the supervisor's", c.name, a, v)
			}
		}
		for _, a := range allow {
			if v := runBPF(t, prog, c.nr, a); v != unix.SECCOMP_RET_ALLOW {
				t.Errorf("%s%x: verdict %#x, want it run", c.name, a, v)
			}
		}
	}
	for _, nr := range []int{unix.SYS_GETPPID, unix.SYS_READ, unix.SYS_OPENAT} {
		if v := runBPF(t, prog, nr, [6]uint64{}); v != ranOff {
			t.Errorf("call %d: verdict %#x, want it left to the rest of the filter", nr, v)
		}
	}
	if got := Filter(nil); len(got) != 0 {
		t.Errorf("no rules make %d instructions", len(got))
	}
}

// TestFilterRuleTooLong: a rule whose jumps cannot reach its returns is
// refused when the filter is built, not installed wrong.
func TestFilterRuleTooLong(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "bad seccomp jump") {
			t.Errorf("a CondIn of 300 values: recovered %v, want a bad-jump panic", r)
		}
	}()
	Filter([]Rule{{Nr: 1, Cond: CondIn, In: make([]uint32, 300)}})
}

// BenchmarkDispatch is Handle's own cost, on a thread with no pending
// restart: a call the supervisor does not serve (returned to the
// watcher), and a futex wake, which it lets run (one ioctl on a closed
// listener, for the same cost in every version).
func BenchmarkDispatch(b *testing.B) {
	s := New(testCfg, -1)
	for _, c := range []struct {
		name string
		n    Notif
	}{
		{"unserved", Notif{Nr: unix.SYS_GETPPID, Pid: 1}},
		{"futex_wake", Notif{Nr: unix.SYS_FUTEX, Pid: 1, Args: [6]uint64{0, 1}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s.Handle(&c.n)
			}
		})
	}
}
