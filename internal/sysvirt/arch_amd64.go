package sysvirt

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
)

// The calls only older ABIs have: the table's rows and the blocked
// calls a timer's signal can end (timers.go) name them by these.
const (
	sysTime      = unix.SYS_TIME
	sysAlarm     = unix.SYS_ALARM
	sysPoll      = unix.SYS_POLL
	sysSelect    = unix.SYS_SELECT
	sysEpollWait = unix.SYS_EPOLL_WAIT
	sysPause     = unix.SYS_PAUSE
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
