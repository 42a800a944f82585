package sysvirt

import (
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

// Rules are the filter rules for cfg.
func Rules(cfg Config) []Rule {
	var r []Rule
	if cfg.Clock {
		r = append(r,
			Rule{Nr: unix.SYS_CLOCK_GETTIME, Cond: CondIn, Arg: 0, In: virtualClocks},
			Rule{Nr: unix.SYS_GETTIMEOFDAY},
			Rule{Nr: unix.SYS_NANOSLEEP},
			Rule{Nr: unix.SYS_CLOCK_NANOSLEEP, Cond: CondIn, Arg: 0, In: virtualClocks},
			Rule{Nr: unix.SYS_EPOLL_PWAIT, Cond: CondPositive, Arg: 3},
			Rule{Nr: unix.SYS_EPOLL_PWAIT2, Cond: CondNonNull, Arg: 3},
			Rule{Nr: unix.SYS_PPOLL, Cond: CondNonNull, Arg: 2},
			Rule{Nr: unix.SYS_PSELECT6, Cond: CondNonNull, Arg: 4},
			Rule{Nr: unix.SYS_FUTEX, Cond: CondFutex, In: []uint32{futexWaitBitset, futexLockPI, futexLockPI2, futexWaitRequeuePI}},
			Rule{Nr: unix.SYS_FUTEX_WAITV, Cond: CondNonNull, Arg: 3},
			// Timers on the virtual clock, and the timed wait for a
			// signal (timers.go). setitimer and getitimer of the
			// CPU-time timers come too, and run as the kernel would.
			Rule{Nr: unix.SYS_SETITIMER},
			Rule{Nr: unix.SYS_GETITIMER},
			Rule{Nr: unix.SYS_TIMER_SETTIME},
			Rule{Nr: unix.SYS_TIMER_GETTIME},
			Rule{Nr: unix.SYS_TIMER_DELETE},
			Rule{Nr: unix.SYS_TIMERFD_SETTIME},
			Rule{Nr: unix.SYS_TIMERFD_GETTIME},
			Rule{Nr: unix.SYS_RT_SIGTIMEDWAIT},
			// sysinfo's uptime, times' return value and adjtimex's
			// time are clocks (sysinfo.go, cputimes.go, adjtimex.go).
			Rule{Nr: unix.SYS_SYSINFO},
			Rule{Nr: unix.SYS_TIMES},
			Rule{Nr: unix.SYS_ADJTIMEX},
			Rule{Nr: unix.SYS_CLOCK_ADJTIME, Cond: CondIn, Arg: 0, In: []uint32{clockRealtime}},
		)
		r = append(r, statRules()...)
		for _, nr := range legacyNotified {
			r = append(r, Rule{Nr: nr})
		}
		for _, t := range legacyTimed {
			if t[1] >= 0 {
				r = append(r, Rule{Nr: t[0], Cond: CondPositive, Arg: t[1]})
			} else {
				r = append(r, Rule{Nr: t[0], Cond: CondNonNull, Arg: 4})
			}
		}
	}
	if cfg.Random {
		r = append(r, Rule{Nr: unix.SYS_GETRANDOM})
	}
	return r
}

// callName names the calls the supervisor answers.
func callName(nr int) string {
	switch nr {
	case unix.SYS_CLOCK_GETTIME:
		return "clock_gettime"
	case unix.SYS_GETTIMEOFDAY:
		return "gettimeofday"
	case sysTime:
		return "time"
	case unix.SYS_GETRANDOM:
		return "getrandom"
	case unix.SYS_NANOSLEEP:
		return "nanosleep"
	case unix.SYS_CLOCK_NANOSLEEP:
		return "clock_nanosleep"
	case unix.SYS_PPOLL:
		return "ppoll"
	case unix.SYS_PSELECT6:
		return "pselect6"
	case unix.SYS_EPOLL_PWAIT:
		return "epoll_pwait"
	case unix.SYS_EPOLL_PWAIT2:
		return "epoll_pwait2"
	case sysEpollWait:
		return "epoll_wait"
	case sysPoll:
		return "poll"
	case sysSelect:
		return "select"
	case unix.SYS_MMAP:
		return "mmap"
	case unix.SYS_MPROTECT:
		return "mprotect"
	case unix.SYS_SETITIMER:
		return "setitimer"
	case unix.SYS_GETITIMER:
		return "getitimer"
	case unix.SYS_TIMER_SETTIME:
		return "timer_settime"
	case unix.SYS_TIMER_GETTIME:
		return "timer_gettime"
	case unix.SYS_TIMERFD_SETTIME:
		return "timerfd_settime"
	case unix.SYS_TIMERFD_GETTIME:
		return "timerfd_gettime"
	case unix.SYS_RT_SIGTIMEDWAIT:
		return "rt_sigtimedwait"
	case sysAlarm:
		return "alarm"
	case unix.SYS_SYSINFO:
		return "sysinfo"
	case unix.SYS_TIMES:
		return "times"
	case unix.SYS_ADJTIMEX:
		return "adjtimex"
	case unix.SYS_CLOCK_ADJTIME:
		return "clock_adjtime"
	}
	if s := statName(nr); s != "" {
		return s
	}
	return "syscall_" + strconv.Itoa(nr)
}
