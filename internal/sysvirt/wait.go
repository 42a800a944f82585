package sysvirt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// waitCall is a timed wait (poll, select or epoll family) being served.
type waitCall struct {
	n       *Notif
	pid     int   // the calling thread
	timeout int64 // ns
	// fds are the caller's descriptors to watch, with the poll events that
	// would make the call return.
	fds    []int
	events []int16
	// epoll: the caller's epoll descriptor (fds then are its members,
	// used only to judge outstanding I/O).
	epoll int
	// zero writes what the kernel writes when the call times out.
	zero func() error
}

// wait serves the calls of the poll, select and epoll families that exist
// on every architecture.
func (s *Supervisor) wait(n *Notif) {
	a := n.Args
	w := &waitCall{n: n, pid: int(n.Pid), epoll: -1}
	var sigmask bool
	var tsp uint64
	switch int(n.Nr) {
	case unix.SYS_PPOLL:
		tsp, sigmask = a[2], a[3] != 0
	case unix.SYS_PSELECT6:
		tsp = a[4]
		if a[5] != 0 {
			var b [8]byte
			if ReadMem(w.pid, a[5], b[:]) != nil {
				Continue(s.fd, n.ID)
				return
			}
			sigmask = binary.LittleEndian.Uint64(b[:]) != 0
		}
	case sysEpollWait:
		w.timeout = msTimeout(a[3])
	case unix.SYS_EPOLL_PWAIT:
		w.timeout, sigmask = msTimeout(a[3]), a[4] != 0
	case unix.SYS_EPOLL_PWAIT2:
		tsp, sigmask = a[3], a[4] != 0
	}
	if tsp != 0 {
		ns, errno := readTimespec(w.pid, tsp)
		if errno != 0 {
			Continue(s.fd, n.ID) // the kernel reports it
			return
		}
		w.timeout = ns
	} else if int(n.Nr) != sysEpollWait && int(n.Nr) != unix.SYS_EPOLL_PWAIT {
		w.timeout = -1
	}
	if sigmask && w.timeout > 0 && s.cfg.Clock {
		s.mu.Lock()
		s.real("wait_sigmask")
		s.mu.Unlock()
		Continue(s.fd, n.ID)
		return
	}
	switch int(n.Nr) {
	case unix.SYS_PPOLL:
		s.servePoll(w, a[0], a[1], tsp, true)
	case unix.SYS_PSELECT6:
		s.serveSelect(w, int(a[0]), a[1], a[2], a[3], tsp, true)
	default:
		w.epoll = int(int32(a[0]))
		s.serveWait(w)
	}
}

// msTimeout reads an int timeout in milliseconds: -1 (any negative) is
// infinite.
func msTimeout(v uint64) int64 {
	ms := int32(v)
	if ms < 0 {
		return -1
	}
	return int64(ms) * 1e6
}

const pollfdSize = 8

// servePoll serves poll and ppoll; tsp is ppoll's timespec (0 for poll).
func (s *Supervisor) servePoll(w *waitCall, fds, nfds, tsp uint64, pp bool) {
	if w.timeout <= 0 || nfds > 1<<16 {
		Continue(s.fd, w.n.ID)
		return
	}
	raw := make([]byte, nfds*pollfdSize)
	if ReadMem(w.pid, fds, raw) != nil {
		Continue(s.fd, w.n.ID)
		return
	}
	for i := 0; i < int(nfds); i++ {
		fd := int32(binary.LittleEndian.Uint32(raw[i*8:]))
		ev := int16(binary.LittleEndian.Uint16(raw[i*8+4:]))
		if fd < 0 {
			continue
		}
		w.fds = append(w.fds, int(fd))
		w.events = append(w.events, ev|unix.POLLERR|unix.POLLHUP|unix.POLLNVAL)
	}
	w.zero = func() error {
		for i := 0; i < int(nfds); i++ {
			raw[i*8+6], raw[i*8+7] = 0, 0
		}
		if err := writeMem(w.pid, fds, raw); err != nil {
			return err
		}
		if pp && tsp != 0 {
			return writeMem(w.pid, tsp, make([]byte, 16))
		}
		return nil
	}
	s.serveWait(w)
}

// serveSelect serves select and pselect6; tv is select's timeval or
// pselect6's timespec.
func (s *Supervisor) serveSelect(w *waitCall, nfds int, r, wr, e, tv uint64, pselect bool) {
	if w.timeout <= 0 || nfds < 0 || nfds > 1<<16 {
		Continue(s.fd, w.n.ID)
		return
	}
	size := (nfds + 63) / 64 * 8
	sets := [3][]byte{}
	for i, addr := range []uint64{r, wr, e} {
		if addr == 0 {
			continue
		}
		sets[i] = make([]byte, size)
		if ReadMem(w.pid, addr, sets[i]) != nil {
			Continue(s.fd, w.n.ID)
			return
		}
	}
	masks := [3]int16{unix.POLLIN | unix.POLLHUP | unix.POLLERR, unix.POLLOUT | unix.POLLERR, unix.POLLPRI}
	for fd := 0; fd < nfds; fd++ {
		var ev int16
		for i, set := range sets {
			if set != nil && set[fd/8]&(1<<(fd%8)) != 0 {
				ev |= masks[i]
			}
		}
		if ev != 0 {
			w.fds = append(w.fds, fd)
			w.events = append(w.events, ev|unix.POLLNVAL)
		}
	}
	w.zero = func() error {
		for i, addr := range []uint64{r, wr, e} {
			if addr != 0 {
				if err := writeMem(w.pid, addr, make([]byte, len(sets[i]))); err != nil {
					return err
				}
			}
		}
		return writeMem(w.pid, tv, make([]byte, 16))
	}
	s.serveWait(w)
}

// serveWait applies the outstanding-I/O rule to w: see the package
// documentation.
func (s *Supervisor) serveWait(w *waitCall) {
	if w.timeout <= 0 || !s.cfg.Clock {
		Continue(s.fd, w.n.ID)
		return
	}
	s.mu.Lock()
	p := s.caller(w.n)
	pidfd := -1
	if p != nil {
		pidfd = s.pidfds.get(p)
	}
	stale := s.pidfds.takeStale()
	s.mu.Unlock()
	for _, fd := range stale {
		unix.Close(fd)
	}
	if pidfd < 0 {
		Continue(s.fd, w.n.ID)
		return
	}
	var (
		watch []unix.PollFd
		dups  []int
	)
	// closeAll closes the duplicates; the pidfd is the cache's until the
	// wait becomes real and takes a copy of its own.
	closeAll := func() {
		for _, d := range dups {
			unix.Close(d)
		}
	}
	dup := func(fd int) (int, bool) {
		d, err := unix.PidfdGetfd(pidfd, fd, 0)
		if err != nil {
			return -1, false
		}
		dups = append(dups, d)
		return d, true
	}
	if w.epoll >= 0 {
		d, ok := dup(w.epoll)
		if !ok {
			closeAll()
			Continue(s.fd, w.n.ID) // not an fd: the kernel says so
			return
		}
		watch = append(watch, unix.PollFd{Fd: int32(d), Events: unix.POLLIN})
	} else {
		for i, fd := range w.fds {
			d, ok := dup(fd)
			if !ok {
				closeAll()
				Continue(s.fd, w.n.ID) // POLLNVAL or EBADF: the kernel answers
				return
			}
			watch = append(watch, unix.PollFd{Fd: int32(d), Events: w.events[i]})
		}
	}
	// outstanding reads the waited descriptors again each time: another
	// thread may have added one to the epoll set since.
	outstanding := func() bool {
		if w.epoll >= 0 {
			for _, fd := range epollMembers(p.tgid, w.epoll) {
				if outstandingFD(p.tgid, fd, dup) {
					return true
				}
			}
			return false
		}
		for i, fd := range w.fds {
			if outstandingFD(p.tgid, fd, func(int) (int, bool) { return int(watch[i].Fd), true }) {
				return true
			}
		}
		return false
	}
	if n, _ := unix.Poll(watch, 0); n > 0 {
		// Ready now: the call returns at once and time does not move.
		closeAll()
		Continue(s.fd, w.n.ID)
		return
	}
	// Time jumps only when nothing can end the wait but the timeout: no
	// outstanding I/O, and no other thread of the process running (it
	// could be about to register a socket, as Go's runtime does while its
	// netpoller waits, or to wake the waiter).
	if !outstanding() && quiescent(p.tgid, w.pid) {
		closeAll()
		s.expire(w, p, "wait")
		return
	}
	// The wait is real: it goes on past this notification, on a
	// goroutine of its own, with a pidfd of its own (see pidfds).
	if pidfd = dupPidfd(pidfd); pidfd < 0 {
		closeAll()
		Continue(s.fd, w.n.ID)
		return
	}
	s.mu.Lock()
	s.real("wait_outstanding")
	s.mu.Unlock()
	fd, id := s.fd, w.n.ID
	go func() {
		defer unix.Close(pidfd)
		defer closeAll()
		deadline := time.Now().Add(time.Duration(w.timeout))
		for {
			left := time.Until(deadline)
			if left <= 0 {
				s.expire(w, p, "")
				return
			}
			n, err := unix.Poll(watch, int(min(left, recheck).Milliseconds())+1)
			if !Valid(fd, id) {
				return
			}
			if n > 0 || (err != nil && err != unix.EINTR) {
				Continue(fd, id)
				return
			}
			if !outstanding() && quiescent(p.tgid, w.pid) {
				s.expire(w, p, "wait")
				return
			}
		}
	}()
}

// recheck is how often a real wait looks again at whether it could jump.
const recheck = 2 * time.Millisecond

// quiescent reports whether every thread of tgid other than the caller is
// blocked: sleeping in a call that is not one the supervisor answers at
// once (a clock read or getrandom held for its answer is as good as
// running). A thread that cannot be read counts as blocked (it is gone).
func quiescent(tgid, caller int) bool {
	dir := "/proc/" + strconv.Itoa(tgid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	if len(ents) == 1 {
		return true
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == caller {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		switch b[i+2] {
		case 'R':
			return false
		case 'S':
			sc, err := os.ReadFile(dir + "/" + e.Name() + "/syscall")
			if err != nil {
				continue
			}
			f := bytes.Fields(sc)
			if len(f) == 0 {
				continue
			}
			if nr, err := strconv.Atoi(string(f[0])); err == nil && instant(nr) {
				return false
			}
		}
	}
	return true
}

// expire answers w as timed out and moves p's clock by its timeout.
func (s *Supervisor) expire(w *waitCall, p *proc, count string) {
	if !Valid(s.fd, w.n.ID) {
		return
	}
	if w.zero != nil && w.zero() != nil {
		s.fail(w.n, unix.EFAULT)
		return
	}
	s.mu.Lock()
	s.setBase(p, w.pid, p.base+w.timeout)
	if count != "" {
		s.served(count)
	}
	s.mu.Unlock()
	s.reply(w.n, 0)
}

// epollMembers lists the descriptors registered in tgid's epoll fd epfd.
func epollMembers(tgid, epfd int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return nil
	}
	var out []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "tfd:" {
			if n, err := strconv.Atoi(f[1]); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// outstandingFD reports whether tgid's descriptor fd can bring data from
// outside the process on its own: a connected socket, a pipe, a terminal, a
// signal, timer, inotify or nested epoll descriptor. A listening socket,
// an eventfd (a wakeup among the process's own threads) or a file is not.
func outstandingFD(tgid, fd int, dup func(int) (int, bool)) bool {
	link, err := os.Readlink("/proc/" + strconv.Itoa(tgid) + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return true
	}
	switch {
	case strings.HasPrefix(link, "socket:"):
		d, ok := dup(fd)
		if !ok {
			return true
		}
		v, err := unix.GetsockoptInt(d, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		return err != nil || v == 0
	case link == "anon_inode:[eventfd]":
		return false
	case strings.HasPrefix(link, "pipe:"), strings.HasPrefix(link, "anon_inode:"),
		strings.HasPrefix(link, "/dev/pts/"), strings.HasPrefix(link, "/dev/tty"),
		link == "/dev/ptmx", link == "/dev/console":
		return true
	}
	return false
}

// instant reports whether nr is a call the supervisor answers at once,
// which a thread blocked in it is about to return from.
func instant(nr int) bool {
	switch nr {
	case unix.SYS_CLOCK_GETTIME, unix.SYS_GETTIMEOFDAY, unix.SYS_GETRANDOM:
		return true
	}
	return nr == sysTime && sysTime >= 0
}
