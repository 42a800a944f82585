package sysvirt

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysinfo(2) in strict mode describes the virtual machine the run's
// /proc/uptime, /proc/loadavg, /proc/stat and /proc/meminfo describe (the
// sandbox serves those), so
// glibc's getloadavg (which calls sysinfo), sysconf(_SC_AVPHYS_PAGES),
// Go's syscall.Sysinfo and coreutils' sort get the same answer in every
// run:
//
//   - uptime is the caller's virtual monotonic clock (CLOCK_BOOTTIME's
//     value), whole seconds rounded up as the kernel rounds them: at the
//     run's start /proc/uptime's figure, then what the process's sleeps
//     and reads added. It is counted as a clock read served but does not
//     advance the clock by a quantum as other reads do: glibc's qsort_r
//     asks sysconf(_SC_PHYS_PAGES), so bash, Python and Node call it at
//     start for the memory size, and their clocks should not depend on
//     that.
//   - loads are 0 and procs 1, as /proc/loadavg shows.
//   - totalram, totalswap, totalhigh and mem_unit are the machine's: they
//     do not change while it runs, and programs size their heaps by them
//     (V8 by totalram), so a made-up figure would change what they do. A
//     replay on another machine shows that machine's.
//   - what varies with the host's load is a fixed share of it: freeram
//     half of totalram (freehigh half of totalhigh), all swap free, no
//     shared or buffer memory. A real figure would differ in every run;
//     half is one a busy machine plausibly shows, and no more than the
//     machine has. A program that sizes a buffer by free memory (sort)
//     sizes it the same every time.

// machine is the host's sysinfo, read once: its constant fields.
var machine = sync.OnceValue(func() unix.Sysinfo_t {
	var si unix.Sysinfo_t
	unix.Sysinfo(&si)
	return si
})

// virtualSysinfo is what sysinfo returns at the virtual monotonic time
// monoNS on a machine whose constants are host's.
func virtualSysinfo(monoNS int64, host unix.Sysinfo_t) unix.Sysinfo_t {
	return unix.Sysinfo_t{
		Uptime:    (monoNS + 1e9 - 1) / 1e9,
		Totalram:  host.Totalram,
		Freeram:   host.Totalram / 2,
		Totalswap: host.Totalswap,
		Freeswap:  host.Totalswap,
		Procs:     1,
		Totalhigh: host.Totalhigh,
		Freehigh:  host.Totalhigh / 2,
		Unit:      host.Unit,
	}
}

func (s *Supervisor) sysinfo(n *Notif) {
	p := s.clockCaller(n)
	if p == nil {
		return
	}
	v := s.now(p, int(n.Pid), 'm', false)
	s.mu.Unlock()
	if n.Args[0] == 0 {
		s.fail(n, unix.EFAULT)
		return
	}
	si := virtualSysinfo(v, machine())
	// The struct as the kernel writes it for a caller of this
	// architecture (64-bit: 112 bytes, its padding zero).
	b := unsafe.Slice((*byte)(unsafe.Pointer(&si)), unsafe.Sizeof(si))
	if s.put(n, n.Args[0], b) {
		s.reply(n, 0)
	}
}

// clockCaller begins a clock call the supervisor answers itself: it returns
// the caller's process with mu held and the call counted as served, or nil
// (mu released) when dal does not serve it, the call let through and
// counted as an escape.
func (s *Supervisor) clockCaller(n *Notif) *proc {
	s.mu.Lock()
	p := s.caller(n)
	if p == nil || !s.cfg.Clock {
		s.escaped(Clock)
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return nil
	}
	s.served(Clock)
	return p
}
