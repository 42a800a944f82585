package sandbox

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/dal-runtime/dal/internal/seccompbpf"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// seccompCall is the struct seccomp_data a filter looks at.
type seccompCall struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (c seccompCall) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], c.nr)
	binary.LittleEndian.PutUint32(b[4:], c.arch)
	for i, a := range c.args {
		binary.LittleEndian.PutUint64(b[seccompbpf.OffArgs+8*i:], a)
	}
	return b
}

// runFilter runs a classic BPF program on c as the kernel's seccomp
// would, and returns its verdict. It knows the instructions the
// assembler emits and fails the test on any other, or on a program that
// runs off its end.
func runFilter(t *testing.T, prog []unix.SockFilter, c seccompCall) uint32 {
	t.Helper()
	data := c.bytes()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		switch {
		case ins.Code == seccompbpf.LdAbsW:
			if ins.K%4 != 0 || int(ins.K)+4 > len(data) {
				t.Fatalf("pc %d: load at %d", pc, ins.K)
			}
			a = binary.LittleEndian.Uint32(data[ins.K:])
		case ins.Code == unix.BPF_ALU|unix.BPF_AND|unix.BPF_K:
			a &= ins.K
		case ins.Code == seccompbpf.JeqK || ins.Code == seccompbpf.JsetK:
			taken := a == ins.K
			if ins.Code == seccompbpf.JsetK {
				taken = a&ins.K != 0
			}
			if taken {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		case ins.Code == seccompbpf.RetK:
			return ins.K
		default:
			t.Fatalf("pc %d: instruction %#x the assembler does not emit", pc, ins.Code)
		}
	}
	t.Fatalf("the filter ran off its end")
	return 0
}

const (
	verdictAllow  = unix.SECCOMP_RET_ALLOW
	verdictNotify = unix.SECCOMP_RET_USER_NOTIF
	verdictEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	verdictEACCES = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
)

func verdictName(v uint32) string {
	switch v {
	case verdictAllow:
		return "allow"
	case verdictNotify:
		return "notify"
	case verdictEPERM:
		return "EPERM"
	case verdictEACCES:
		return "EACCES"
	}
	return fmt.Sprintf("%#x", v)
}

// ruleCases are calls each rule must hand to the supervisor and calls
// of the same number it must let through.
func ruleCases(r sysvirt.Rule) (notify, allow [][6]uint64) {
	with := func(i int, v uint64) [6]uint64 {
		var a [6]uint64
		a[i] = v
		return a
	}
	switch r.Cond {
	case sysvirt.CondAlways:
		notify = append(notify, [6]uint64{}, [6]uint64{1, 2, 3, 4, 5, 6})
	case sysvirt.CondPositive:
		notify = append(notify, with(r.Arg, 1), with(r.Arg, 1<<31-1))
		allow = append(allow, with(r.Arg, 0), with(r.Arg, 0xffffffff), with(r.Arg, 1<<31))
	case sysvirt.CondNonNull:
		notify = append(notify, with(r.Arg, 0x7ffc0000), with(r.Arg, 0x7ffc_0000_0000))
		allow = append(allow, with(r.Arg, 0))
	case sysvirt.CondIn:
		for _, v := range r.In {
			notify = append(notify, with(r.Arg, uint64(v)))
		}
		allow = append(allow, with(r.Arg, 1000), with(r.Arg, 0xfffffffa))
	case sysvirt.CondFutex:
		for _, op := range r.In {
			a := with(1, uint64(op)|128) // FUTEX_PRIVATE_FLAG
			a[3] = 0x7ffc0000
			notify = append(notify, a)
			allow = append(allow, with(1, uint64(op)))
		}
		allow = append(allow, with(1, 1)) // FUTEX_WAKE
	}
	return notify, allow
}

// TestFilterAssembles builds the filter for every combination of what it
// watches, with and without each part of the syscall layer (assemble
// panics on a jump too long), and runs calls through it: each does what
// its rule says, on this architecture's numbers.
func TestFilterAssembles(t *testing.T) {
	layers := map[string]sysvirt.Config{
		"none":   {},
		"seeded": {Random: true},
		"strict": {Clock: true, Random: true},
	}
	for layerName, layer := range layers {
		for bits := range 8 {
			on := filterFor{network: bits&1 != 0, policy: bits&2 != 0, writes: bits&4 != 0}
			name := fmt.Sprintf("%s/network=%v,policy=%v,writes=%v", layerName, on.network, on.policy, on.writes)
			t.Run(name, func(t *testing.T) {
				var rules []sysvirt.Rule
				if layer.Enabled() {
					rules = sysvirt.Rules(layer)
				}
				prog := filter(on, rules)
				if len(prog) > unix.BPF_MAXINSNS {
					t.Fatalf("the filter has %d instructions, over the kernel's %d", len(prog), unix.BPF_MAXINSNS)
				}
				checkFilter(t, prog, on, rules)
			})
		}
	}
	// Room for the layer to grow: a hundred more rules, of every kind,
	// on numbers no call has.
	rules := sysvirt.Rules(layers["strict"])
	for i := range 100 {
		r := sysvirt.Rule{Nr: 2000 + i, Cond: sysvirt.Cond(i % 5), Arg: i % 6, In: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}}
		if r.Cond == sysvirt.CondFutex {
			r.Arg = 0
		}
		rules = append(rules, r)
	}
	on := filterFor{network: true, policy: true, writes: true}
	checkFilter(t, filter(on, rules), on, rules)
}

func checkFilter(t *testing.T, prog []unix.SockFilter, on filterFor, rules []sysvirt.Rule) {
	expect := func(c seccompCall, want uint32, what string) {
		t.Helper()
		if got := runFilter(t, prog, c); got != want {
			t.Errorf("%s (nr %d, arch %#x, args %x): %s, want %s", what, c.nr, c.arch, c.args, verdictName(got), verdictName(want))
		}
	}
	native := func(nr int, args ...uint64) seccompCall {
		c := seccompCall{nr: uint32(nr), arch: auditArch}
		copy(c.args[:], args)
		return c
	}
	byNr := map[int]bool{}
	for _, r := range rules {
		byNr[r.Nr] = true
		notify, allow := ruleCases(r)
		for _, a := range notify {
			expect(seccompCall{nr: uint32(r.Nr), arch: auditArch, args: a}, verdictNotify, fmt.Sprintf("rule %+v", r))
		}
		for _, a := range allow {
			expect(seccompCall{nr: uint32(r.Nr), arch: auditArch, args: a}, verdictAllow, fmt.Sprintf("rule %+v", r))
		}
	}
	if !byNr[unix.SYS_GETPPID] {
		expect(native(unix.SYS_GETPPID), verdictAllow, "getppid")
	}
	expect(native(unix.SYS_READ, 0, 0, 16), verdictAllow, "read")
	expect(native(unix.SYS_IO_URING_SETUP), verdictNotify, "io_uring_setup")
	expect(native(unix.SYS_IO_URING_ENTER), verdictEPERM, "io_uring_enter")
	expect(native(unix.SYS_IOCTL, 0, unix.TIOCSTI), verdictEPERM, "ioctl TIOCSTI")
	expect(native(unix.SYS_IOCTL, 0, unix.TIOCGWINSZ), verdictAllow, "ioctl TIOCGWINSZ")
	ifOn := func(b bool) uint32 {
		if b {
			return verdictNotify
		}
		return verdictAllow
	}
	expect(native(unix.SYS_CONNECT), ifOn(on.network), "connect")
	expect(native(unix.SYS_EXECVE), ifOn(on.policy), "execve")
	expect(native(unix.SYS_OPENAT, 0, 0, unix.O_RDONLY), verdictAllow, "openat read-only")
	expect(native(unix.SYS_OPENAT, 0, 0, unix.O_WRONLY|unix.O_CREAT), ifOn(on.writes), "openat for writing")
	expect(native(unix.SYS_MKDIRAT), ifOn(on.writes), "mkdirat")

	compat := func(nr uint32, args ...uint64) seccompCall {
		c := seccompCall{nr: nr, arch: compatArch}
		copy(c.args[:], args)
		return c
	}
	expect(compat(compatRefused[0]), verdictEPERM, "the other ABI's io_uring_setup")
	expect(compat(compatIoctl, 0, unix.TIOCSTI), verdictEPERM, "the other ABI's ioctl TIOCSTI")
	expect(compat(compatIoctl, 0, unix.TIOCGWINSZ), verdictAllow, "the other ABI's ioctl TIOCGWINSZ")
	expect(compat(20), verdictAllow, "the other ABI's call 20")
	wantExec := uint32(verdictAllow)
	if on.policy {
		wantExec = verdictEACCES
	}
	for _, nr := range compatExec {
		expect(compat(nr), wantExec, "the other ABI's exec")
	}
	expect(seccompCall{nr: unix.SYS_IO_URING_ENTER, arch: 0x12345678}, verdictAllow, "an unknown ABI")
}
