package sysvirt

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Notif is struct seccomp_notif.
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// Resp is struct seccomp_notif_resp.
type Resp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// Recv waits for the next notification on listener fd.
func Recv(fd int, n *Notif) error {
	*n = Notif{}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
	if errno != 0 {
		return errno
	}
	return nil
}

// Send answers a notification; an error means the caller is gone (or was
// interrupted by a signal and will call again).
func Send(fd int, r *Resp) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(r)))
	if errno != 0 {
		return errno
	}
	return nil
}

// Continue lets the call run as the kernel would.
func Continue(fd int, id uint64) error {
	return Send(fd, &Resp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE})
}

// Valid reports whether notification id is still pending: its caller is
// alive and still waiting, so its pid still names it.
func Valid(fd int, id uint64) bool {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return errno == 0
}

// reply answers n with val, in place of the kernel: the call never
// reaches the kernel's syscall entry, so the eBPF tracer does not see it,
// and it is counted here instead.
func (s *Supervisor) reply(n *Notif, val int64) {
	if Send(s.fd, &Resp{ID: n.ID, Val: val}) == nil {
		s.answered(n)
	}
}

// fail answers n with an error, in place of the kernel.
func (s *Supervisor) fail(n *Notif, errno unix.Errno) {
	if Send(s.fd, &Resp{ID: n.ID, Error: -int32(errno)}) == nil {
		s.answered(n)
	}
}

func (s *Supervisor) answered(n *Notif) {
	s.mu.Lock()
	add(&s.counts.Calls, callName(int(n.Nr)), 1)
	s.mu.Unlock()
}

var errShort = errors.New("short transfer")

// ReadMem reads len(p) bytes at addr of pid's memory (process_vm_readv).
func ReadMem(pid int, addr uint64, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &p[0]}}
	local[0].SetLen(len(p))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return err
	}
	if n != len(p) {
		return errShort
	}
	return nil
}

// writeMem writes p at addr of pid's memory.
func writeMem(pid int, addr uint64, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &p[0]}}
	local[0].SetLen(len(p))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}
	n, err := unix.ProcessVMWritev(pid, local, remote, 0)
	if err != nil {
		return err
	}
	if n != len(p) {
		return errShort
	}
	return nil
}

// timespec is struct timespec (64-bit): seconds and nanoseconds.
func putTimespec(ns int64) []byte {
	var b [16]byte
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	binary.LittleEndian.PutUint64(b[0:], uint64(sec))
	binary.LittleEndian.PutUint64(b[8:], uint64(nsec))
	return b[:]
}

// readTimespec reads a struct timespec and returns it in ns; ok is false
// when it is not a valid one (EINVAL) or cannot be read (EFAULT).
func readTimespec(pid int, addr uint64) (ns int64, errno unix.Errno) {
	var b [16]byte
	if err := ReadMem(pid, addr, b[:]); err != nil {
		return 0, unix.EFAULT
	}
	sec := int64(binary.LittleEndian.Uint64(b[0:]))
	nsec := int64(binary.LittleEndian.Uint64(b[8:]))
	if sec < 0 || nsec < 0 || nsec >= 1e9 {
		return 0, unix.EINVAL
	}
	if sec > math.MaxInt64/int64(time.Second)-1 {
		return math.MaxInt64, 0
	}
	return sec*1e9 + nsec, 0
}
