package sysvirt

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// How a traced process resolves paths, for the stat family (statcall.go).
// Checking its root directory and mount namespace costs two stats of /proc,
// a third of a served stat, so a process keeps the answer once found to be
// the supervisor's. The filter hands the supervisor chroot, unshare, setns
// and pivot_root, the calls that change them, and a process that makes one
// is checked at every call from then on (each), as is one that shares its
// file system context with another process (clone with CLONE_FS, seen with
// kcmp when it starts). A thread with a descriptor table of its own makes
// its process look descriptors up through the thread's pidfd.
//
// chdir and fchdir are not handed over, so the working directory is opened
// at each call: the sandbox's init makes the agent's first chdir in a vfork
// child while its tracer's thread holds a Go processor in the raw clone, and
// a notification then could leave a stop-the-world waiting for that
// processor forever (doc.go). No call of the agent's own exec path may be
// handed to the supervisor for the same reason.

// callerView is what a stat knows of its caller's view, copied under mu.
type callerView struct {
	p     *proc
	tgid  int
	same  bool // root and mount namespace are the supervisor's
	pidfd int  // the process's pidfd (not to be closed), or -1: open the thread's
}

// viewOf copies p's view for a stat; withPidfd gets the process's pidfd
// (for a call on a descriptor). Callers hold mu and run on the goroutine
// that calls Handle.
func (s *Supervisor) viewOf(p *proc, withPidfd bool) callerView {
	v := callerView{p: p, tgid: p.tgid, pidfd: -1}
	if !p.each {
		v.same = p.sameView
		if withPidfd && !p.ownFiles {
			v.pidfd = s.pidfds.get(p)
		}
	}
	return v
}

// viewSeen notes that v's process resolves as the supervisor does.
func (s *Supervisor) viewSeen(v *callerView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[v.tgid]; p == v.p && !p.each {
		p.sameView = true
	}
}

// viewChange notes n, a call that changes how its caller resolves paths,
// and lets it run.
func (s *Supervisor) viewChange(n *Notif) {
	s.mu.Lock()
	if p := s.lookup(int(n.Pid)); p != nil {
		p.each, p.sameView = true, false
	}
	s.mu.Unlock()
	Continue(s.fd, n.ID)
}

// spawnedView notes how new task child of parent's resolves paths: a
// thread with a descriptor table of its own, or a process that shares its
// file system context with parent. c is the new process (nil for a
// thread). Callers hold mu.
func (s *Supervisor) spawnedView(parent, c *proc, child int) {
	const kcmpFiles, kcmpFS = 2, 3
	if c == nil {
		if !sameKernelObject(parent.tgid, child, kcmpFiles, false) {
			parent.ownFiles = true
		}
		return
	}
	if sameKernelObject(parent.tgid, child, kcmpFS, false) {
		parent.each, parent.sameView = true, false
		c.each = true
	}
}

// sameKernelObject reports whether tasks a and b share the kernel object
// of kcmp type typ; guess is the answer when kcmp cannot tell.
func sameKernelObject(a, b, typ int, guess bool) bool {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), uintptr(typ), 0, 0, 0)
	if errno != 0 {
		return guess
	}
	return r == 0
}

// selfView is the supervisor's own root, mount namespace and /proc.
type selfView struct {
	ok                      bool
	rootDev, rootIno, mntNS uint64
	procDev                 uint64
}

// self returns the supervisor's view, read once. Only the goroutine that
// calls Handle calls it.
func (s *Supervisor) self() *selfView {
	s.selfOnce.Do(func() {
		var root, ns, proc unix.Stat_t
		if unix.Stat("/", &root) == nil && unix.Stat("/proc/self/ns/mnt", &ns) == nil && unix.Stat("/proc", &proc) == nil {
			s.selfView = selfView{ok: true, rootDev: root.Dev, rootIno: root.Ino, mntNS: ns.Ino, procDev: proc.Dev}
		}
	})
	return &s.selfView
}

// sameView reports whether task tid resolves paths as the supervisor
// does: the same root directory and mount namespace.
func (s *Supervisor) sameView(tid int) bool {
	v := s.self()
	if !v.ok {
		return false
	}
	dir := "/proc/" + strconv.Itoa(tid)
	var root, ns unix.Stat_t
	if unix.Stat(dir+"/root", &root) != nil || unix.Stat(dir+"/ns/mnt", &ns) != nil {
		return false
	}
	return root.Dev == v.rootDev && root.Ino == v.rootIno && ns.Ino == v.mntNS
}
