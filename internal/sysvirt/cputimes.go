package sysvirt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// times(2) in strict mode returns the caller's virtual monotonic clock
// in clock ticks (USER_HZ, 100 a second): POSIX has it count from "an
// arbitrary point in the past", and Linux's point (its jiffies' start,
// five minutes before a wrap) is no program's business. Python's
// os.times().elapsed and programs that time themselves with times() read
// it. It is a clock read like clock_gettime's, counted served.
//
// The struct tms it fills holds the process's CPU times and its waited
// children's: real, as CLOCK_PROCESS_CPUTIME_ID is (they measure work,
// not time), counted as "cpu_clock". They come from /proc/<tgid>/stat,
// whose utime, stime, cutime and cstime the kernel sums as times() does.

// userHZ is USER_HZ, the unit of times(2) and /proc's clock ticks on
// every architecture dal runs on.
const userHZ = 100

func (s *Supervisor) times(n *Notif) {
	p := s.clockCaller(n)
	if p == nil {
		return
	}
	v := s.now(p, int(n.Pid), 'm', true)
	tgid := p.tgid
	if n.Args[0] != 0 {
		s.real(CPUClock)
	}
	s.mu.Unlock()
	if buf := n.Args[0]; buf != 0 {
		tms, err := cpuTimes(tgid)
		if err != nil {
			// The process is gone: nothing will read the answer.
			s.fail(n, unix.ESRCH)
			return
		}
		var b [32]byte
		for i, t := range tms {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(t))
		}
		if !s.put(n, buf, b[:]) {
			return
		}
	}
	s.reply(n, v/(1e9/userHZ))
}

// cpuTimes reads a process's utime, stime, cutime and cstime, in clock
// ticks, from /proc/<tgid>/stat.
func cpuTimes(tgid int) ([4]int64, error) {
	var tms [4]int64
	b, err := readFile("/proc/" + strconv.Itoa(tgid) + "/stat")
	if err != nil {
		return tms, err
	}
	// The command (field 2) may hold spaces and parentheses: the fields
	// after it start after its last ')', at field 3 (the state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return tms, errors.New("no command in /proc/<pid>/stat")
	}
	f := bytes.Fields(b[i+1:])
	const utime = 14 - 3 // utime is field 14
	if len(f) < utime+4 {
		return tms, errors.New("short /proc/<pid>/stat")
	}
	for k := range tms {
		if tms[k], err = strconv.ParseInt(string(f[utime+k]), 10, 64); err != nil {
			return tms, err
		}
	}
	return tms, nil
}
