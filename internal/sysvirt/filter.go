package sysvirt

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// Rule says when the seccomp filter hands a call to the supervisor.
type Rule struct {
	Nr   int
	Cond Cond
	// Arg is the argument Cond looks at.
	Arg int
	// In are the values CondIn (and CondFutex, for the operation's
	// command) accept.
	In []uint32
}

// Cond is a rule's test.
type Cond int

const (
	CondAlways   Cond = iota
	CondPositive      // int32(args[Arg]) > 0: a timeout in ms that would wait
	CondNonNull       // args[Arg] != 0: a pointer to a timeout
	CondIn            // uint32(args[Arg]) is one of In: a clock id
	CondFutex         // args[1]&0x7f is one of In and args[3] != 0
)

// virtualClocks are the clock ids served virtually.
var virtualClocks = []uint32{clockRealtime, clockMonotonic, clockMonotonicRaw, clockRealtimeCoarse,
	clockMonotonicCoarse, clockBoottime, clockRealtimeAlarm, clockBoottimeAlarm, clockTAI}

// Rules are the filter rules for cfg: the rows of the table cfg turns on
// that this architecture has, in the table's order.
func Rules(cfg Config) []Rule {
	var r []Rule
	for i := range table {
		c := &table[i]
		if c.nr >= 0 && c.enabled(cfg) {
			r = append(r, Rule{Nr: c.nr, Cond: c.when.cond, Arg: c.when.arg, In: c.when.in})
		}
	}
	return r
}

// callName names call nr for [Counts]: a served call by its row, and the
// calls the supervisor makes a process run to map dal's vDSO (fast.go).
func callName(nr int) string {
	if c := served(int32(nr)); c != nil && nr == c.nr {
		return c.name
	}
	switch nr {
	case unix.SYS_MMAP:
		return "mmap"
	case unix.SYS_MPROTECT:
		return "mprotect"
	}
	return "syscall_" + strconv.Itoa(nr)
}

// Classic BPF, as seccomp runs it on struct seccomp_data.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	offNr   = 0
	offArgs = 16 // args[i] at 16+8i; the low half first (little endian)
)

// Filter is the classic BPF that hands the calls of rules to the listener,
// for a seccomp filter to run on the native ABI's calls (its architecture
// checked before). Each rule's instructions end in their own returns
// (notify, allow) and jump only within them, so any number of rules fits
// (the longest, a CondIn of n values, jumps n+2 ahead); a call no rule
// takes runs on past the last instruction.
func Filter(rules []Rule) []unix.SockFilter {
	var prog []unix.SockFilter
	for _, r := range rules {
		prog = append(prog, r.program()...)
	}
	return prog
}

// program is r's part of [Filter].
func (r Rule) program() []unix.SockFilter {
	b := &bpf{labels: map[string]int{}}
	arg := func(i int) uint32 { return uint32(offArgs + 8*i) }
	b.load(offNr)
	b.jump(bpfJeqK, uint32(r.Nr), "", "next")
	switch r.Cond {
	case CondAlways:
		// on to notify
	case CondPositive:
		b.load(arg(r.Arg))
		b.jump(bpfJeqK, 0, "allow", "")
		b.jump(bpfJsetK, 0x80000000, "allow", "notify")
	case CondNonNull:
		b.load(arg(r.Arg))
		b.jump(bpfJeqK, 0, "", "notify")
		b.load(arg(r.Arg) + 4)
		b.jump(bpfJeqK, 0, "allow", "notify")
	case CondIn:
		b.load(arg(r.Arg))
		for _, v := range r.In {
			b.jump(bpfJeqK, v, "notify", "")
		}
		b.jump(bpfJeqK, 0, "allow", "allow")
	case CondFutex:
		b.load(arg(1))
		b.alu(unix.BPF_AND, 0x7f)
		for _, v := range r.In {
			b.jump(bpfJeqK, v, "timed", "")
		}
		b.jump(bpfJeqK, 0, "allow", "allow")
		b.label("timed")
		b.load(arg(3))
		b.jump(bpfJeqK, 0, "", "notify")
		b.load(arg(3) + 4)
		b.jump(bpfJeqK, 0, "allow", "notify")
	default:
		panic(fmt.Sprintf("sysvirt: rule for call %d has no condition %d", r.Nr, r.Cond))
	}
	b.label("notify")
	b.ret(unix.SECCOMP_RET_USER_NOTIF)
	b.label("allow")
	b.ret(unix.SECCOMP_RET_ALLOW)
	b.label("next")
	return b.assemble()
}

// bpf assembles one rule's instructions; its jumps name labels, forward
// only, within the rule.
type bpf struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []bpfFixup
}

type bpfFixup struct {
	pc     int
	jt, jf string // "" = the next instruction
}

func (b *bpf) label(name string) { b.labels[name] = len(b.prog) }

func (b *bpf) load(off uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: bpfLdAbsW, K: off})
}

func (b *bpf) alu(op uint16, k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: unix.BPF_ALU | op | unix.BPF_K, K: k})
}

func (b *bpf) ret(k uint32) {
	b.prog = append(b.prog, unix.SockFilter{Code: bpfRetK, K: k})
}

func (b *bpf) jump(code uint16, k uint32, jt, jf string) {
	b.fixups = append(b.fixups, bpfFixup{pc: len(b.prog), jt: jt, jf: jf})
	b.prog = append(b.prog, unix.SockFilter{Code: code, K: k})
}

// assemble resolves the jumps. It panics on one longer than 255
// instructions (an 8-bit offset): a CondIn or CondFutex rule of more
// than 250 values.
func (b *bpf) assemble() []unix.SockFilter {
	rel := func(pc int, l string) uint8 {
		if l == "" {
			return 0
		}
		t, ok := b.labels[l]
		if !ok || t <= pc || t-pc-1 > 255 {
			panic("sysvirt: bad seccomp jump to " + l)
		}
		return uint8(t - pc - 1)
	}
	for _, f := range b.fixups {
		b.prog[f.pc].Jt, b.prog[f.pc].Jf = rel(f.pc, f.jt), rel(f.pc, f.jf)
	}
	return b.prog
}
