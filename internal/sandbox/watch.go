package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/dal-runtime/dal/internal/seccompbpf"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// watched is a system call that writes by path. Fields are argument
// indexes; dirfd -1 means relative to the cwd, path2 -1 means no second
// path, flags -1 means always watched (else only with write-intent flags).
type watched struct {
	nr            int
	name          string
	dirfd, path   int
	dirfd2, path2 int
	flags         int
}

func pathCall(nr int, name string, dirfd, path int) watched {
	return watched{nr: nr, name: name, dirfd: dirfd, path: path, dirfd2: -1, path2: -1, flags: -1}
}

func twoPathCall(nr int, name string, dirfd, path, dirfd2, path2 int) watched {
	return watched{nr: nr, name: name, dirfd: dirfd, path: path, dirfd2: dirfd2, path2: path2, flags: -1}
}

func openCall(nr int, name string, dirfd, path, flags int) watched {
	w := pathCall(nr, name, dirfd, path)
	w.flags = flags
	return w
}

// calls are the watched system calls of this architecture.
var calls = append([]watched{
	openCall(unix.SYS_OPENAT, "openat", 0, 1, 2),
	pathCall(unix.SYS_OPENAT2, "openat2", 0, 1),
	pathCall(unix.SYS_MKDIRAT, "mkdirat", 0, 1),
	pathCall(unix.SYS_UNLINKAT, "unlinkat", 0, 1),
	twoPathCall(unix.SYS_RENAMEAT, "renameat", 0, 1, 2, 3),
	twoPathCall(unix.SYS_RENAMEAT2, "renameat2", 0, 1, 2, 3),
	pathCall(unix.SYS_LINKAT, "linkat", 2, 3),
	pathCall(unix.SYS_SYMLINKAT, "symlinkat", 1, 2),
	pathCall(unix.SYS_MKNODAT, "mknodat", 0, 1),
	pathCall(unix.SYS_FCHMODAT, "fchmodat", 0, 1),
	pathCall(unix.SYS_FCHMODAT2, "fchmodat2", 0, 1),
	pathCall(unix.SYS_FCHOWNAT, "fchownat", 0, 1),
	pathCall(unix.SYS_UTIMENSAT, "utimensat", 0, 1),
	pathCall(unix.SYS_TRUNCATE, "truncate", -1, 0),
	pathCall(unix.SYS_SETXATTR, "setxattr", -1, 0),
	pathCall(unix.SYS_LSETXATTR, "lsetxattr", -1, 0),
	pathCall(unix.SYS_REMOVEXATTR, "removexattr", -1, 0),
	pathCall(unix.SYS_LREMOVEXATTR, "lremovexattr", -1, 0),
}, legacyCalls...)

// writeFlags are the open flags that mean a write.
const writeFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC

// Calls refused outright (EPERM) by the filter: the rest of io_uring
// (without io_uring_setup, which the watcher refuses and lists, there is
// no ring to enter), and the terminal ioctls that push input into a
// terminal (TIOCSTI, TIOCLINUX's paste), as Flatpak refuses them: the
// agent's terminal is a pty of its own, and this keeps it so should it
// hold another.
var refusedCalls = []int{unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}
var refusedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// The 32-bit ABI the kernel may also offer the agent (int 0x80 on x86-64)
// is not watched, but io_uring and the same ioctls are refused there too,
// by its own numbers (io_uring's are the same on every architecture).
var compatRefused = []uint32{425, 426, 427} // io_uring_setup, _enter, _register

const compatIoctl = 54 // ioctl on i386 and arm

// uringCall is io_uring_setup: an io_uring's writes are made by the
// kernel on the agent's behalf, past the watcher, so none is set up.
var uringCall = watched{nr: unix.SYS_IO_URING_SETUP, name: "io_uring_setup", dirfd: -1, path: -1, dirfd2: -1, path2: -1, flags: -1}

// filterFor says what the filter hands to the listener besides the
// syscall layer's calls and io_uring_setup.
type filterFor struct {
	network bool // connect: the sandbox has its own network namespace
	policy  bool // execve and execveat, for a policy gate
	writes  bool // the writes watched for read-only mounts (none in a direct sandbox)
}

// filter builds the program: the watched calls go to the listener, the
// refused ones fail with EPERM, the rest (and the rest of other ABIs) are
// allowed. With policy (a policy gate), execve and execveat go to the
// listener too, and the other ABI's are refused (policygate.go).
func filter(on filterFor, virt []sysvirt.Rule) []unix.SockFilter {
	always := []watched{uringCall}
	var flagged []watched
	if on.network {
		always = append(always, connectCall)
	}
	if on.policy {
		always = append(always, execCalls...)
	}
	var writes []watched
	if on.writes {
		writes = calls
	}
	for _, c := range writes {
		if c.flags < 0 {
			always = append(always, c)
		} else {
			flagged = append(flagged, c)
		}
	}
	b := seccompbpf.New()
	// The other ABI's few rules come first, so that the arch check jumps
	// over them alone and no jump spans the native rules, which may grow:
	// the syscall layer's each end in their own returns, and the watched
	// calls' jump only to the three returns after them.
	b.Load(seccompbpf.OffArch)
	b.Jump(seccompbpf.JeqK, auditArch, "native", "")
	b.Jump(seccompbpf.JeqK, compatArch, "", "compat-allow")
	b.Load(seccompbpf.OffNr)
	for _, nr := range compatRefused {
		b.Jump(seccompbpf.JeqK, nr, "compat-deny", "")
	}
	if on.policy {
		for _, nr := range compatExec {
			b.Jump(seccompbpf.JeqK, nr, "compat-eacces", "")
		}
	}
	b.Jump(seccompbpf.JeqK, compatIoctl, "", "compat-allow")
	refuseIoctls(b, "compat-deny", "compat-allow")
	b.Label("compat-allow")
	b.Ret(unix.SECCOMP_RET_ALLOW)
	b.Label("compat-deny")
	b.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	if on.policy {
		b.Label("compat-eacces")
		b.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES))
	}

	b.Label("native")
	// The syscall layer's calls first: its rules end in their own
	// returns, so no jump leaves them.
	b.Append(sysvirt.Filter(virt)...)
	b.Load(seccompbpf.OffNr)
	for _, c := range always {
		b.Jump(seccompbpf.JeqK, uint32(c.nr), "notify", "")
	}
	for i, c := range flagged {
		next := fmt.Sprintf("flagged%d", i+1)
		b.Jump(seccompbpf.JeqK, uint32(c.nr), "", next)
		b.Load(uint32(seccompbpf.OffArgs + 8*c.flags))
		b.Jump(seccompbpf.JsetK, writeFlags, "notify", "allow")
		b.Label(next)
	}
	for _, nr := range refusedCalls {
		b.Jump(seccompbpf.JeqK, uint32(nr), "deny", "")
	}
	b.Jump(seccompbpf.JeqK, unix.SYS_IOCTL, "", "allow")
	refuseIoctls(b, "deny", "allow")
	b.Label("allow")
	b.Ret(unix.SECCOMP_RET_ALLOW)
	b.Label("notify")
	b.Ret(unix.SECCOMP_RET_USER_NOTIF)
	b.Label("deny")
	b.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	return b.Assemble()
}

// refuseIoctls checks an ioctl's request against refusedIoctls. Its
// request is an unsigned int: the low half of the argument is all of it.
func refuseIoctls(b *seccompbpf.Program, deny, allow string) {
	b.Load(seccompbpf.OffArgs + 8*1)
	for i, req := range refusedIoctls {
		next := ""
		if i == len(refusedIoctls)-1 {
			next = allow
		}
		b.Jump(seccompbpf.JeqK, req, deny, next)
	}
}

// installFilter installs the filter on the calling thread only (which must
// be locked and have no_new_privs) and returns the listener fd.
func installFilter(on filterFor, virt []sysvirt.Rule) (int, error) {
	f := filter(on, virt)
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	fd, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	if errno == unix.EBUSY {
		return -1, errors.New("this process is already watched by another seccomp supervisor (it runs inside dal-exec run, record or replay, or another sandbox): start dal-exec outside it")
	}
	if errno != 0 {
		return -1, fmt.Errorf("sandbox: install the write watcher (seccomp user notification): %v", errno)
	}
	unix.CloseOnExec(int(fd))
	// The supervisor answers on the CPU of the call it answers, and the
	// caller resumes there (Linux 6.6): a round trip without waking
	// another CPU. Best effort: older kernels answer as before.
	unix.Syscall(unix.SYS_IOCTL, fd, unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	return int(fd), nil
}

// struct seccomp_notif and seccomp_notif_resp.
type (
	seccompNotif     = sysvirt.Notif
	seccompNotifResp = sysvirt.Resp
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point string
	ro    bool
}

// maxDenied bounds the list of distinct denied writes.
const maxDenied = 10000

// watcher answers the filter's notifications and records writes aimed at
// read-only mounts.
type watcher struct {
	out    *os.File
	mounts []mountEntry
	byNr   map[int]watched
	seen   map[string]bool
	quiet  []string
	// network: the sandbox has its own network namespace, and connect is
	// watched for attempts to reach other machines.
	network bool
	// virt, when set, answers the syscall layer's calls.
	virt *sysvirt.Supervisor
	// policy, when set, holds execs and loopback connects for the
	// policy gate (policygate.go).
	policy *policyClient
}

// connectCall is watched when the sandbox has its own network namespace.
var connectCall = watched{nr: unix.SYS_CONNECT, name: "connect", dirfd: -1, path: -1, dirfd2: -1, path2: -1, flags: -1}

func newWatcher(out *os.File, quiet []string, network bool) *watcher {
	w := &watcher{out: out, byNr: map[int]watched{}, seen: map[string]bool{}, quiet: quiet, network: network}
	for _, c := range calls {
		w.byNr[c.nr] = c
	}
	return w
}

// readMounts reads the sandbox's final mount table.
func (w *watcher) readMounts() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("sandbox: read the mount table: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 {
			continue
		}
		ro := false
		for _, o := range strings.Split(fl[5], ",") {
			ro = ro || o == "ro"
		}
		w.mounts = append(w.mounts, mountEntry{point: unescapeMount(fl[4]), ro: ro})
	}
	return sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readOnly reports whether p (absolute, symlinks resolved) is on a
// read-only mount: the topmost mount with the longest matching point.
func (w *watcher) readOnly(p string) bool {
	best, ro := -1, false
	for _, m := range w.mounts {
		if within(p, m.point) && len(m.point) >= best {
			best, ro = len(m.point), m.ro
		}
	}
	return ro
}

// serve answers notifications until the listener fails (the init exits
// with the agent, so it never needs to stop).
func (w *watcher) serve(fd int) {
	if w.virt != nil {
		// A thread of its own, whose walks for a caller's stat need no
		// capset (sysvirt's callercaps.go).
		defer w.virt.ServeThread()()
	}
	for {
		var n seccompNotif
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); errno != 0 {
			if errno == unix.EINTR || errno == unix.ENOENT {
				continue
			}
			return
		}
		if w.virt != nil && w.virt.Handle(&n) {
			continue
		}
		if w.policy != nil && isExec(n.Nr) {
			go w.policyExec(fd, n)
			continue
		}
		if w.policy != nil && int(n.Nr) == unix.SYS_CONNECT && w.policyConnect(fd, &n) {
			continue
		}
		if w.network && int(n.Nr) == unix.SYS_CONNECT {
			w.connect(fd, &n)
			continue
		}
		if int(n.Nr) == uringCall.nr {
			w.refuse(fd, &n, uringCall.name)
			continue
		}
		c, ok := w.byNr[int(n.Nr)]
		var paths []string
		var open bool
		if ok {
			paths = w.paths(&n, c)
			open = c.flags >= 0 || c.name == "openat2" || c.name == "creat"
			// The pid may have died and been reused while we read.
			id := n.ID
			if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); errno != 0 {
				paths = nil
			}
		}
		// Record before answering: the call (and so the agent, and then
		// the init) cannot finish before the write is on the list.
		for _, p := range paths {
			if w.denied(p, open) {
				w.record(c.name, p)
				break
			}
		}
		resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// paths reads and resolves the call's path arguments.
func (w *watcher) paths(n *seccompNotif, c watched) []string {
	var out []string
	for _, a := range [][2]int{{c.dirfd, c.path}, {c.dirfd2, c.path2}} {
		if a[1] < 0 {
			continue
		}
		s, err := readString(int(n.Pid), n.Args[a[1]])
		if err != nil {
			continue
		}
		dirfd := int32(unix.AT_FDCWD)
		if a[0] >= 0 {
			dirfd = int32(n.Args[a[0]])
		}
		if p := resolve(int(n.Pid), dirfd, s); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readString reads a NUL-terminated string (at most PATH_MAX) from pid's
// memory, a page at a time so an unmapped page after it does no harm. A
// NULL pointer reads as "".
func readString(pid int, addr uint64) (string, error) {
	if addr == 0 {
		return "", nil
	}
	var out []byte
	buf := make([]byte, 4096)
	for len(out) < unix.PathMax {
		n := 4096 - int(addr%4096)
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(n)
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}
		got, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil || got <= 0 {
			return "", fmt.Errorf("read pid %d's memory: %v", pid, err)
		}
		if i := bytes.IndexByte(buf[:got], 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf[:got]...)
		addr += uint64(got)
	}
	return "", errors.New("path too long")
}

// resolve makes p absolute against pid's cwd or dirfd, as the kernel will.
func resolve(pid int, dirfd int32, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	link := "/proc/" + strconv.Itoa(pid) + "/cwd"
	if dirfd != unix.AT_FDCWD {
		link = "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(int(dirfd))
	}
	base, err := os.Readlink(link)
	if err != nil || !filepath.IsAbs(base) {
		return ""
	}
	return filepath.Join(base, p)
}

// denied reports whether a write to p fails for being on a read-only
// mount. An open follows a final symlink and may target a device.
func (w *watcher) denied(p string, open bool) bool {
	dir, base := filepath.Split(p)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		p = filepath.Join(d, base)
	}
	if open {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode()&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return false
		}
	}
	return w.readOnly(p)
}

// record appends one denied write to the list, once per (op, path).
func (w *watcher) record(op, p string) {
	for _, q := range w.quiet {
		if p != "" && within(p, q) {
			return
		}
	}
	key := op + "\x00" + p
	if w.seen[key] || len(w.seen) >= maxDenied {
		return
	}
	w.seen[key] = true
	b, _ := json.Marshal(DeniedWrite{Op: op, Path: p})
	w.out.Write(append(b, '\n'))
}

// refuse fails the call with EPERM, listed as a denied write without a
// path.
func (w *watcher) refuse(fd int, n *seccompNotif, op string) {
	w.record(op, "")
	resp := seccompNotifResp{ID: n.ID, Error: -int32(unix.EPERM)}
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// connect lists an attempt to reach an address outside the sandbox's
// loopback on an IPv4 or IPv6 socket (it fails: the namespace has no
// route), then lets the call go on. A Unix socket's connect is not listed:
// it goes where the sandbox's mounts lead, and may well succeed.
func (w *watcher) connect(fd int, n *seccompNotif) {
	if addr := remoteAddr(int(n.Pid), n.Args[1], n.Args[2]); addr != "" && inetSocket(int(n.Pid), int(n.Args[0])) {
		id := n.ID
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); errno == 0 {
			w.recordConnect(addr)
		}
	}
	resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd for a thread that
// need not lead its group, as the notification's pid may be.
const pidfdThread = unix.O_EXCL

// inetSocket reports whether thread tid's descriptor fd is an IPv4 or
// IPv6 socket, asking the socket itself through a copy of the descriptor
// (pidfd_getfd). False when that cannot be told: nothing is claimed then.
func inetSocket(tid, fd int) bool {
	pfd, err := unix.PidfdOpen(tid, pidfdThread)
	if err == unix.EINVAL {
		pfd, err = unix.PidfdOpen(tid, 0)
	}
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	sfd, err := unix.PidfdGetfd(pfd, fd, 0)
	if err != nil {
		return false
	}
	defer unix.Close(sfd)
	d, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	return err == nil && (d == unix.AF_INET || d == unix.AF_INET6)
}

// connectAddr reads a connect's sockaddr from pid's memory and returns
// "ip:port" for an IPv4 or IPv6 address, with whether it is this host's
// own (loopback or unspecified); "" for any other family.
func connectAddr(pid int, ptr, size uint64) (addr string, local bool) {
	if ptr == 0 || size < 16 || size > 128 {
		return "", false
	}
	buf := make([]byte, size)
	if sysvirt.ReadMem(pid, ptr, buf) != nil {
		return "", false
	}
	family := uint16(buf[0]) | uint16(buf[1])<<8
	port := int(buf[2])<<8 | int(buf[3])
	var ip net.IP
	switch {
	case family == unix.AF_INET:
		ip = net.IP(buf[4:8])
	case family == unix.AF_INET6 && size >= 24:
		ip = net.IP(buf[8:24])
	default:
		return "", false
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), ip.IsLoopback() || ip.IsUnspecified()
}

// remoteAddr is connectAddr's address when it is off this host's loopback.
func remoteAddr(pid int, ptr, size uint64) string {
	if addr, local := connectAddr(pid, ptr, size); !local {
		return addr
	}
	return ""
}

// recordConnect appends one blocked connection to the list, once per address.
func (w *watcher) recordConnect(addr string) {
	key := "connect\x00" + addr
	if w.seen[key] || len(w.seen) >= maxDenied {
		return
	}
	w.seen[key] = true
	b, _ := json.Marshal(BlockedConnect{Op: "connect", Addr: addr})
	w.out.Write(append(b, '\n'))
}
