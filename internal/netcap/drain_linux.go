package netcap

import (
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sock_diag (linux/inet_diag.h).
const (
	inetDiagInfo     = 2 // INET_DIAG_INFO: struct tcp_info
	sizeofDiagReq    = 56
	sizeofDiagMsg    = 72
	diagMsgStateOff  = 1
	diagMsgRqueueOff = 56
)

// TCP states (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpFinWait2    = 5
	tcpTimeWait    = 6
	tcpClose       = 7
	tcpCloseWait   = 8
	tcpLastAck     = 9
	tcpClosing     = 11
)

// diagSet holds one sock_diag netlink socket per network namespace the
// proxy's client connections live in. Its sockets are closed by close.
type diagSet struct {
	mu     sync.Mutex
	closed bool
	socks  map[uint64]*diagSock // by namespace inode
}

func newDiagSet() *diagSet { return &diagSet{socks: map[uint64]*diagSock{}} }

// diagSock is a NETLINK_SOCK_DIAG socket; one request at a time.
type diagSock struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	buf []byte
}

// peerSocket asks about the client's end of one connection.
type peerSocket struct {
	s   *diagSock
	req []byte          // the netlink request, sequence number aside
	own syscall.RawConn // our end
	// beforeQuery, when set (by a test), is called before each question
	// is sent.
	beforeQuery func()
}

// watch returns a peerSocket for the client's end of c, nil when it
// cannot be watched.
func (d *diagSet) watch(c net.Conn) *peerSocket {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if d == nil || !ok1 || !ok2 {
		return nil
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	nsfd := -1
	rc.Control(func(fd uintptr) {
		// The namespace the connection lives in; without CAP_NET_ADMIN
		// there, our own.
		if r, err := unix.IoctlRetInt(int(fd), unix.SIOCGSKNS); err == nil {
			nsfd = r
		}
	})
	s := d.sock(nsfd)
	if nsfd >= 0 {
		unix.Close(nsfd)
	}
	if s == nil {
		return nil
	}
	// The client's socket: its own address is our remote one.
	family, src, dst := byte(unix.AF_INET), remote.IP.To4(), local.IP.To4()
	if src == nil || dst == nil {
		family, src, dst = unix.AF_INET6, remote.IP.To16(), local.IP.To16()
	}
	if src == nil || dst == nil {
		return nil
	}
	req := make([]byte, unix.SizeofNlMsghdr+sizeofDiagReq)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	b := req[unix.SizeofNlMsghdr:]
	b[0], b[1], b[2] = family, unix.IPPROTO_TCP, 1<<(inetDiagInfo-1)
	binary.NativeEndian.PutUint32(b[4:], ^uint32(0)) // in any state: closing too
	id := b[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(remote.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(local.Port))
	copy(id[4:20], src)
	copy(id[20:36], dst)
	binary.NativeEndian.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(id[44:], ^uint32(0))
	return &peerSocket{s: s, req: req, own: rc}
}

// sock returns the diag socket of the namespace nsfd (-1: ours), opened
// on first use.
func (d *diagSet) sock(nsfd int) *diagSock {
	var ino uint64
	if nsfd >= 0 {
		var st unix.Stat_t
		if unix.Fstat(nsfd, &st) != nil {
			return nil
		}
		ino = st.Ino
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if s, ok := d.socks[ino]; ok {
		return s
	}
	fd, err := diagSocketIn(nsfd)
	if err != nil {
		d.socks[ino] = nil // not again
		return nil
	}
	s := &diagSock{fd: fd, buf: make([]byte, 8<<10)}
	d.socks[ino] = s
	return s
}

// adopt takes f, a NETLINK_SOCK_DIAG socket made in another network
// namespace, for the connections of that namespace (see
// Proxy.AdoptDiagSocket).
func (d *diagSet) adopt(f *os.File) error {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return err
	}
	nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		unix.Close(fd)
		return err
	}
	var st unix.Stat_t
	err = unix.Fstat(nsfd, &st)
	unix.Close(nsfd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.socks[st.Ino]; s != nil || d.closed {
		unix.Close(fd)
		return nil
	}
	d.socks[st.Ino] = &diagSock{fd: fd, buf: make([]byte, 8<<10)}
	return nil
}

// diagSocketIn opens a sock_diag socket in the namespace nsfd (-1, or the
// namespace of the calling thread: here), on a thread of its own that
// dies rather than run on in the wrong namespace should switching back
// fail.
func diagSocketIn(nsfd int) (int, error) {
	open := func() (int, error) {
		return unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	}
	if nsfd < 0 {
		return open()
	}
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer self.Close()
		var st1, st2 unix.Stat_t
		if unix.Fstat(int(self.Fd()), &st1) == nil && unix.Fstat(nsfd, &st2) == nil && st1.Ino == st2.Ino && st1.Dev == st2.Dev {
			fd, err := open()
			runtime.UnlockOSThread()
			ch <- result{fd, err}
			return
		}
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		fd, err := open()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) != nil {
			if err == nil {
				unix.Close(fd)
			}
			ch <- result{-1, syscall.EINVAL}
			return // the thread stays locked and exits with the goroutine
		}
		runtime.UnlockOSThread()
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

func (d *diagSet) close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for k, s := range d.socks {
		if s != nil {
			s.mu.Lock()
			unix.Close(s.fd)
			s.fd = -1
			s.mu.Unlock()
		}
		delete(d.socks, k)
	}
}

// state asks the kernel about the client's socket; false when it is gone
// or cannot be asked.
func (p *peerSocket) state() (peerState, bool) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return peerState{}, false
	}
	s.seq++
	binary.NativeEndian.PutUint32(p.req[8:], s.seq)
	if p.beforeQuery != nil {
		p.beforeQuery()
	}
	if err := unix.Sendto(s.fd, p.req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return peerState{}, false
	}
	for {
		n, _, err := unix.Recvfrom(s.fd, s.buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return peerState{}, false
		}
		st, done, ok := parseDiag(s.buf[:n], s.seq)
		if done {
			return st, ok
		}
	}
}

// ours says, once the client's socket is gone, how the client closed the
// connection, as our end of it saw (see drained).
func (p *peerSocket) ours() int {
	end := endUnknown
	p.own.Control(func(fd uintptr) {
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		switch ti.State {
		case tcpEstablished:
			end = endOpen
		case tcpClose:
			end = endUnread // reset
		case tcpCloseWait, tcpLastAck, tcpClosing:
			// A FIN came: did it acknowledge everything?
			if n, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
				end = endUnread
				if n == 0 {
					end = endRead
				}
			}
		}
	})
	return end
}

// acked reports whether the client's socket has acknowledged every byte
// written to our end (SIOCOUTQ: none unacknowledged): it acknowledges
// bytes once they are in its receive queue, counted in its rcv_nxt.
func (p *peerSocket) acked() bool {
	n := -1
	p.own.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = v
		}
	})
	return n == 0
}

// parseDiag reads the answer to request seq: done once it was found (an
// error, or a socket's state).
func parseDiag(b []byte, seq uint32) (st peerState, done, ok bool) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		typ := binary.NativeEndian.Uint16(b[4:])
		mseq := binary.NativeEndian.Uint32(b[8:])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return st, true, false
		}
		msg := b[unix.SizeofNlMsghdr:l]
		b = b[min(nlAlign(l), len(b)):]
		if mseq != seq {
			continue // the answer to an earlier, abandoned request
		}
		switch {
		case typ == unix.NLMSG_ERROR && len(msg) >= 4 && int32(binary.NativeEndian.Uint32(msg)) == -int32(unix.ENOENT):
			// No such socket: the client's is closed and gone.
			st.gone = true
			return st, true, true
		case typ == unix.NLMSG_ERROR || typ == unix.NLMSG_DONE:
			return st, true, false
		case typ != unix.SOCK_DIAG_BY_FAMILY || len(msg) < sizeofDiagMsg:
			continue
		}
		state := msg[diagMsgStateOff]
		st.unread = binary.NativeEndian.Uint32(msg[diagMsgRqueueOff:])
		for a := msg[sizeofDiagMsg:]; len(a) >= 4; {
			al := int(binary.NativeEndian.Uint16(a[0:]))
			at := binary.NativeEndian.Uint16(a[2:])
			if al < 4 || al > len(a) {
				break
			}
			if at == inetDiagInfo {
				var ti unix.TCPInfo
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&ti)), unsafe.Sizeof(ti)), a[4:al])
				st.received = ti.Bytes_received
				return st, true, true
			}
			a = a[min(nlAlign(al), len(a)):]
		}
		if state == tcpTimeWait || state == tcpFinWait2 || state == tcpClose {
			// A time-wait socket (which has no tcp_info): the client's
			// closed without anything unread.
			return peerState{gone: true}, true, true
		}
		return st, true, false // no tcp_info: cannot tell
	}
	return st, false, false
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// nap sleeps d on this thread (nanosleep: microsecond precision, where a
// Go timer may wait for the netpoller's next millisecond).
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Nanosleep(&ts, nil)
}

// yield gives way to the goroutines of this process and to the threads
// on this CPU (the client may be one of them).
func yield() {
	runtime.Gosched()
	unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
