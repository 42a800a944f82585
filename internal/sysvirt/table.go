package sysvirt

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// call is one system call the supervisor serves: a row of [table].
type call struct {
	// nr is the call's number on this architecture: x/sys/unix's where
	// every ABI dal runs on has the call, else arch_*.go's constant,
	// negative on an ABI without it (the row is left out there).
	nr   int
	name string
	// when says which of the call's invocations the filter hands over.
	when when
	// handle answers n (or lets it run); it runs on the goroutine that
	// calls Handle.
	handle func(s *Supervisor, n *Notif)
	// category is what the call serves: Random's calls are filtered when
	// Config.Random is set, every other category's when Config.Clock is.
	category Category
}

// table is every call the supervisor serves, in the order the filter
// checks them. The filter's rules ([Rules]), [Supervisor.Handle]'s dispatch
// and the calls' names in [Counts] are derived from it: serving another
// call is a row here and its handler.
var table = []call{
	{unix.SYS_CLOCK_GETTIME, "clock_gettime", in(0, virtualClocks...), (*Supervisor).clockGettime, Clock},
	{unix.SYS_GETTIMEOFDAY, "gettimeofday", always, (*Supervisor).gettimeofday, Clock},
	{unix.SYS_NANOSLEEP, "nanosleep", always, (*Supervisor).nanosleep, Sleep},
	{unix.SYS_CLOCK_NANOSLEEP, "clock_nanosleep", in(0, virtualClocks...), (*Supervisor).clockNanosleep, Sleep},
	{unix.SYS_EPOLL_PWAIT, "epoll_pwait", positive(3), (*Supervisor).wait, Wait},
	{unix.SYS_EPOLL_PWAIT2, "epoll_pwait2", nonNull(3), (*Supervisor).wait, Wait},
	{unix.SYS_PPOLL, "ppoll", nonNull(2), (*Supervisor).wait, Wait},
	{unix.SYS_PSELECT6, "pselect6", nonNull(4), (*Supervisor).wait, Wait},
	// An absolute deadline on the virtual clock becomes one on the real
	// clock, and the call runs (supervisor.go).
	{unix.SYS_FUTEX, "futex", timedFutex(futexWaitBitset, futexLockPI, futexLockPI2, futexWaitRequeuePI), (*Supervisor).futex, Deadline},
	{unix.SYS_FUTEX_WAITV, "futex_waitv", nonNull(3), (*Supervisor).futexWaitv, Deadline},
	// Timers on the virtual clock (timers.go). setitimer and getitimer of
	// the CPU-time timers come too, and run as the kernel would.
	{unix.SYS_SETITIMER, "setitimer", always, (*Supervisor).setitimerCall, Timer},
	{unix.SYS_GETITIMER, "getitimer", always, (*Supervisor).getitimer, Timer},
	{unix.SYS_TIMER_SETTIME, "timer_settime", always, (*Supervisor).timerSettime, Timer},
	{unix.SYS_TIMER_GETTIME, "timer_gettime", always, (*Supervisor).posixTimerGettime, Timer},
	{unix.SYS_TIMER_DELETE, "timer_delete", always, (*Supervisor).timerDelete, Timer},
	{unix.SYS_TIMERFD_SETTIME, "timerfd_settime", always, (*Supervisor).timerfdSettime, Timer},
	{unix.SYS_TIMERFD_GETTIME, "timerfd_gettime", always, (*Supervisor).timerfdGettime, Timer},
	// The timed wait for a signal (timers.go).
	{unix.SYS_RT_SIGTIMEDWAIT, "rt_sigtimedwait", always, (*Supervisor).sigwait, Wait},
	// sysinfo's uptime, times' return value and adjtimex's time are
	// clocks (sysinfo.go, cputimes.go, adjtimex.go).
	{unix.SYS_SYSINFO, "sysinfo", always, (*Supervisor).sysinfo, Clock},
	{unix.SYS_TIMES, "times", always, (*Supervisor).times, Clock},
	{unix.SYS_ADJTIMEX, "adjtimex", always, (*Supervisor).adjtimexCall, Clock},
	{unix.SYS_CLOCK_ADJTIME, "clock_adjtime", in(0, clockRealtime), (*Supervisor).clockAdjtime, Clock},
	// The stat family's file times (statcall.go), and the calls that
	// change how a process resolves their paths (statview.go).
	{unix.SYS_NEWFSTATAT, "newfstatat", always, (*Supervisor).stat, FileTimes},
	{unix.SYS_FSTAT, "fstat", always, (*Supervisor).stat, FileTimes},
	{unix.SYS_STATX, "statx", always, (*Supervisor).stat, FileTimes},
	{sysStat, "stat", always, (*Supervisor).stat, FileTimes},
	{sysLstat, "lstat", always, (*Supervisor).stat, FileTimes},
	{unix.SYS_CHROOT, "chroot", always, (*Supervisor).viewChange, FileTimes},
	{unix.SYS_UNSHARE, "unshare", always, (*Supervisor).viewChange, FileTimes},
	{unix.SYS_SETNS, "setns", always, (*Supervisor).viewChange, FileTimes},
	{unix.SYS_PIVOT_ROOT, "pivot_root", always, (*Supervisor).viewChange, FileTimes},
	// The calls only older ABIs have (legacy.go).
	{sysTime, "time", always, (*Supervisor).time, Clock},
	{sysAlarm, "alarm", always, (*Supervisor).alarm, Timer},
	{sysPoll, "poll", positive(2), (*Supervisor).poll, Wait},
	{sysSelect, "select", nonNull(4), (*Supervisor).selectCall, Wait},
	{sysEpollWait, "epoll_wait", positive(3), (*Supervisor).wait, Wait},
	{unix.SYS_GETRANDOM, "getrandom", always, (*Supervisor).getrandom, Random},
	// The port of a bind to port 0 (bindport.go).
	{unix.SYS_BIND, "bind", always, (*Supervisor).bind, Port},
}

// when is a row's filter rule without its number: see [Rule].
type when struct {
	cond Cond
	arg  int
	in   []uint32
}

// The rules a row can have.
var always = when{cond: CondAlways}

func positive(arg int) when         { return when{cond: CondPositive, arg: arg} }
func nonNull(arg int) when          { return when{cond: CondNonNull, arg: arg} }
func in(arg int, v ...uint32) when  { return when{cond: CondIn, arg: arg, in: v} }
func timedFutex(ops ...uint32) when { return when{cond: CondFutex, in: ops} }

// maxNr bounds the numbers of the calls served, for byNr.
const maxNr = 512

// byNr is the table by number (nil: not served), filled once by init:
// Handle looks its notification's call up here.
var byNr [maxNr]*call

func init() {
	for i := range table {
		c := &table[i]
		if c.nr < 0 {
			continue // this ABI has no such call
		}
		if c.nr >= maxNr || byNr[c.nr] != nil {
			panic(fmt.Sprintf("sysvirt: the table's row %s has number %d, out of range or taken", c.name, c.nr))
		}
		byNr[c.nr] = c
	}
}

// served returns the row of call nr, or nil when the supervisor does not
// serve it.
func served(nr int32) *call {
	if uint32(nr) >= maxNr {
		return nil
	}
	return byNr[nr]
}

// enabled reports whether cfg has the filter hand c over.
func (c *call) enabled(cfg Config) bool {
	if c.category == Random {
		return cfg.Random
	}
	return cfg.Clock
}

// The handlers whose work takes more than the notification.

func (s *Supervisor) nanosleep(n *Notif) { s.sleep(n, clockMonotonic, 0, n.Args[0], n.Args[1]) }

func (s *Supervisor) clockNanosleep(n *Notif) {
	s.sleep(n, int32(n.Args[0]), int(n.Args[1]), n.Args[2], n.Args[3])
}

func (s *Supervisor) setitimerCall(n *Notif)     { s.setitimer(n, false) }
func (s *Supervisor) alarm(n *Notif)             { s.setitimer(n, true) }
func (s *Supervisor) posixTimerGettime(n *Notif) { s.timerGettime(n, timerPOSIX) }
func (s *Supervisor) timerfdGettime(n *Notif)    { s.timerGettime(n, timerFD) }
func (s *Supervisor) adjtimexCall(n *Notif)      { s.adjtimex(n, n.Args[0]) }
func (s *Supervisor) clockAdjtime(n *Notif)      { s.adjtimex(n, n.Args[1]) }
