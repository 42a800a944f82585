package sysvirt

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
)

// sysTime is time(2), which only older ABIs have.
const sysTime = unix.SYS_TIME

// waitLegacy serves poll and select, which only older ABIs have.
func (s *Supervisor) waitLegacy(n *Notif) bool {
	w := &waitCall{n: n, pid: int(n.Pid), epoll: -1}
	switch int(n.Nr) {
	case unix.SYS_POLL:
		w.timeout = msTimeout(n.Args[2])
		s.servePoll(w, n.Args[0], n.Args[1], 0, false)
	case unix.SYS_ALARM:
		s.setitimer(n, true)
	case unix.SYS_SELECT:
		tv := n.Args[4]
		if tv == 0 {
			Continue(s.fd, n.ID)
			return true
		}
		var b [16]byte
		if ReadMem(w.pid, tv, b[:]) != nil {
			Continue(s.fd, n.ID)
			return true
		}
		sec, usec := int64(binary.LittleEndian.Uint64(b[0:])), int64(binary.LittleEndian.Uint64(b[8:]))
		if sec < 0 || usec < 0 || usec >= 1e6 {
			Continue(s.fd, n.ID)
			return true
		}
		w.timeout = sec*1e9 + usec*1e3
		s.serveSelect(w, int(n.Args[0]), n.Args[1], n.Args[2], n.Args[3], tv, false)
	default:
		return false
	}
	return true
}

// legacyNotified are the calls of this ABI beyond [Notified]'s.
var legacyNotified = []int{unix.SYS_TIME, unix.SYS_ALARM}

// legacyTimed are poll and select: (nr, index of an int timeout in ms, or
// -1 for a pointer).
var legacyTimed = [][2]int{{unix.SYS_POLL, 2}, {unix.SYS_SELECT, -1}, {unix.SYS_EPOLL_WAIT, 3}}

const sysEpollWait = unix.SYS_EPOLL_WAIT

const (
	sysPoll   = unix.SYS_POLL
	sysSelect = unix.SYS_SELECT
)

const (
	sysAlarm = unix.SYS_ALARM
	sysPause = unix.SYS_PAUSE
)

// fsBase reads the FS base of task tid, stopped under ptrace.
func fsBase(tid int) (uint64, bool) {
	var r unix.PtraceRegs
	if unix.PtraceGetRegs(tid, &r) != nil {
		return 0, false
	}
	return r.Fs_base, true
}

// fsgsbase reports whether the kernel lets programs run rdfsbase
// (HWCAP2_FSGSBASE in the auxiliary vector), which dal's vDSO uses to
// tell a quiet thread (quiet.go).
var fsgsbase = sync.OnceValue(func() bool {
	const atHWCAP2, hwcap2FSGSBASE = 26, 1 << 1
	b, err := readFile("/proc/self/auxv")
	if err != nil {
		return false
	}
	for ; len(b) >= 16; b = b[16:] {
		if binary.LittleEndian.Uint64(b) == atHWCAP2 {
			return binary.LittleEndian.Uint64(b[8:])&hwcap2FSGSBASE != 0
		}
	}
	return false
})
