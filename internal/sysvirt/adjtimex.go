package sysvirt

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adjtimex(2) and clock_adjtime(CLOCK_REALTIME), asked only to read
// (modes 0, or ADJ_OFFSET_SS_READ), return the time and the kernel's
// clock discipline (glibc's ntp_gettime calls them). In strict mode they
// describe the virtual clock: its time (a realtime read, as
// gettimeofday's, in microseconds), and the state of a clock no NTP
// daemon disciplines, as a machine just booted has it — unsynchronized
// (STA_UNSYNC; the call returns TIME_ERROR), no offset or frequency
// correction, the largest error estimates — so that what varies with the
// host's NTP daemon does not reach the program. The kernel's constants
// (tick, tolerance, precision, the TAI offset) are the host's. A call
// that changes the clock goes to the kernel (without CAP_SYS_TIME it
// fails with EPERM), counted as "clock_adjust".

const (
	adjOffsetSSRead = 0xa001 // ADJ_OFFSET_SS_READ
	staUnsync       = 0x0040 // STA_UNSYNC
	timeError       = 5      // TIME_ERROR: the clock is not synchronized
	ntpPhaseLimit   = 16e6   // NTP_PHASE_LIMIT, µs: the largest error
	ntpTimeConstant = 2      // the kernel's time_constant at boot
)

// hostTimex is the host's clock discipline, read once: its constants.
var hostTimex = sync.OnceValue(func() unix.Timex {
	var tx unix.Timex
	unix.Adjtimex(&tx)
	return tx
})

// virtualTimex is what a read of the clock's discipline returns at the
// virtual realtime ns, on a kernel whose constants are host's.
func virtualTimex(ns int64, host unix.Timex) unix.Timex {
	return unix.Timex{
		Maxerror:  ntpPhaseLimit,
		Esterror:  ntpPhaseLimit,
		Status:    staUnsync,
		Constant:  ntpTimeConstant,
		Precision: host.Precision,
		Tolerance: host.Tolerance,
		Time:      unix.Timeval{Sec: ns / 1e9, Usec: ns % 1e9 / 1e3},
		Tick:      host.Tick,
		Tai:       host.Tai,
	}
}

// adjtimex serves a read of the clock's discipline whose struct timex is
// at addr.
func (s *Supervisor) adjtimex(n *Notif, addr uint64) {
	var tx unix.Timex
	b := unsafe.Slice((*byte)(unsafe.Pointer(&tx)), unsafe.Sizeof(tx))
	if ReadMem(int(n.Pid), addr, b[:4]) != nil {
		s.fail(n, unix.EFAULT)
		return
	}
	if tx.Modes != 0 && tx.Modes != adjOffsetSSRead {
		s.mu.Lock()
		s.real(ClockAdjust)
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	v, ok := s.readClock(n, 'r')
	if !ok {
		return
	}
	tx = virtualTimex(v, hostTimex())
	if s.put(n, addr, b) {
		s.reply(n, timeError)
	}
}
