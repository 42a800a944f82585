package sysvirt

import (
	"fmt"
	"strconv"

	"github.com/dal-runtime/dal/internal/seccompbpf"
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
	b := seccompbpf.New()
	arg := func(i int) uint32 { return uint32(seccompbpf.OffArgs + 8*i) }
	b.Load(seccompbpf.OffNr)
	b.Jump(seccompbpf.JeqK, uint32(r.Nr), "", "next")
	switch r.Cond {
	case CondAlways:
		// on to notify
	case CondPositive:
		b.Load(arg(r.Arg))
		b.Jump(seccompbpf.JeqK, 0, "allow", "")
		b.Jump(seccompbpf.JsetK, 0x80000000, "allow", "notify")
	case CondNonNull:
		b.Load(arg(r.Arg))
		b.Jump(seccompbpf.JeqK, 0, "", "notify")
		b.Load(arg(r.Arg) + 4)
		b.Jump(seccompbpf.JeqK, 0, "allow", "notify")
	case CondIn:
		b.Load(arg(r.Arg))
		for _, v := range r.In {
			b.Jump(seccompbpf.JeqK, v, "notify", "")
		}
		b.Jump(seccompbpf.JeqK, 0, "allow", "allow")
	case CondFutex:
		b.Load(arg(1))
		b.ALU(unix.BPF_AND, 0x7f)
		for _, v := range r.In {
			b.Jump(seccompbpf.JeqK, v, "timed", "")
		}
		b.Jump(seccompbpf.JeqK, 0, "allow", "allow")
		b.Label("timed")
		b.Load(arg(3))
		b.Jump(seccompbpf.JeqK, 0, "", "notify")
		b.Load(arg(3) + 4)
		b.Jump(seccompbpf.JeqK, 0, "allow", "notify")
	default:
		panic(fmt.Sprintf("sysvirt: rule for call %d has no condition %d", r.Nr, r.Cond))
	}
	b.Label("notify")
	b.Ret(unix.SECCOMP_RET_USER_NOTIF)
	b.Label("allow")
	b.Ret(unix.SECCOMP_RET_ALLOW)
	b.Label("next")
	return b.Assemble()
}
