package sysvirt

import "encoding/binary"

// poll and select, which only older ABIs have (the table's rows of
// arch_*.go's numbers); time and alarm's handlers are time and alarm.

// poll serves poll(fds, nfds, timeout in ms).
func (s *Supervisor) poll(n *Notif) {
	w := &waitCall{n: n, pid: int(n.Pid), epoll: -1}
	w.timeout = msTimeout(n.Args[2])
	s.servePoll(w, n.Args[0], n.Args[1], 0, false)
}

// selectCall serves select(nfds, readfds, writefds, exceptfds, timeval).
func (s *Supervisor) selectCall(n *Notif) {
	w := &waitCall{n: n, pid: int(n.Pid), epoll: -1}
	tv := n.Args[4]
	if tv == 0 {
		Continue(s.fd, n.ID)
		return
	}
	var b [16]byte
	if ReadMem(w.pid, tv, b[:]) != nil {
		Continue(s.fd, n.ID)
		return
	}
	sec, usec := int64(binary.LittleEndian.Uint64(b[0:])), int64(binary.LittleEndian.Uint64(b[8:]))
	if sec < 0 || usec < 0 || usec >= 1e6 {
		Continue(s.fd, n.ID)
		return
	}
	w.timeout = sec*1e9 + usec*1e3
	s.serveSelect(w, int(n.Args[0]), n.Args[1], n.Args[2], n.Args[3], tv, false)
}
