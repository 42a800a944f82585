package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"unsafe"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// PolicyGate asks dal-exec before a process of the agent's tree runs a program
// (execve, execveat) or connects to a service on the sandbox's loopback
// (the policy gate, docs/policy.md). With a gate, execve and execveat go
// to the watcher too; without one the filter has no rule for them, so a
// run without a policy pays nothing.
//
// The watcher reads the program's path, argv and working directory from
// the caller's memory and /proc, checks that the notification is still
// valid (the caller has not died and its pid been reused), and holds the
// call while Decide runs. Limit (TOCTOU): the kernel reads argv again
// when the call goes on, and a process sharing the caller's memory
// (another of its threads, or one writing through a shared mapping) can
// change it in between: the gate sees what a cooperating agent runs, it
// is not a boundary against code that already runs instructions of its
// choosing (which could as well write a script and run that). A 32-bit
// execve (int 0x80 on x86-64), whose argv the watcher does not read, is
// refused with EACCES while a gate is on.
type PolicyGate struct {
	// Decide is called in dal-exec for each gated call, from several
	// goroutines at once, and may block (a person deciding): true lets
	// the call go on, false fails it with EACCES (exec) or ECONNREFUSED
	// (connect). A broken channel to dal-exec fails every call.
	Decide func(PolicyCall) bool
	// Exempt are "ip:port" addresses whose connects are not gated:
	// dal's own proxy, whose requests the policy sees one by one.
	Exempt []string
}

// PolicyCall is one gated call.
type PolicyCall struct {
	Kind string `json:"kind"` // "exec" or "connect"
	// Exec: the program as the caller named it, resolved against its
	// working directory; its argv (Truncated when longer than dal reads)
	// and working directory.
	Path      string   `json:"path,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	// Stream is the caller's process stream under the syscall layer
	// ("0", "0.1"...), "" without it.
	Stream string `json:"stream,omitempty"`
	// Addr is a connect's "ip:port".
	Addr string `json:"addr,omitempty"`
}

// policyFD is the init's end of the gate channel (a socketpair).
const policyFD = 8

// Bounds of what the watcher reads of an exec's arguments.
const (
	maxArgs     = 4096
	maxArgBytes = 256 << 10
)

// policyRequest and policyReply are the channel's messages, one JSON object
// per line.
type policyRequest struct {
	ID   uint64     `json:"id"`
	Call PolicyCall `json:"call"`
}

type policyReply struct {
	ID    uint64 `json:"id"`
	Allow bool   `json:"allow"`
}

// servePolicy answers the init's requests on c with g.Decide until the init
// hangs up or c is closed, then closes read; answers decided later go
// nowhere once the init is gone. The [Cmd] owns c; a malformed request
// closes it here already, so the init fails every call.
func servePolicy(c *os.File, g *PolicyGate, read chan<- struct{}) {
	var mu sync.Mutex
	enc := json.NewEncoder(c)
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 2*maxArgBytes+(1<<20))
	var wg sync.WaitGroup
	for sc.Scan() {
		var req policyRequest
		if json.Unmarshal(sc.Bytes(), &req) != nil {
			c.Close()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			allow := g.Decide(req.Call)
			mu.Lock()
			enc.Encode(policyReply{ID: req.ID, Allow: allow})
			mu.Unlock()
		}()
	}
	close(read)
	wg.Wait()
}

// newPolicyChannel returns the parent's and the init's ends of a gate
// channel.
func newPolicyChannel() (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("create the policy gate's channel: %w", err)
	}
	unix.SetNonblock(fds[0], true)
	return os.NewFile(uintptr(fds[0]), "gate"), os.NewFile(uintptr(fds[1]), "gate"), nil
}

// policyClient is the init's side: it sends calls and waits for answers.
type policyClient struct {
	c      net.Conn
	exempt map[string]bool
	mu     sync.Mutex
	next   uint64
	wait   map[uint64]chan bool
	broken bool
}

// openPolicyClient takes the channel at policyFD. The descriptor is made
// non-blocking so that waiting goroutines park in the runtime's poller
// and take no thread (threads take pids in the agent's namespace).
func openPolicyClient(exempt []string) (*policyClient, error) {
	unix.CloseOnExec(policyFD)
	if err := unix.SetNonblock(policyFD, true); err != nil {
		return nil, fmt.Errorf("sandbox: the policy gate's channel: %v", err)
	}
	f := os.NewFile(policyFD, "gate")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: the policy gate's channel: %v", err)
	}
	g := &policyClient{c: c, exempt: map[string]bool{}, wait: map[uint64]chan bool{}}
	for _, a := range exempt {
		g.exempt[a] = true
	}
	go g.read()
	return g, nil
}

func (g *policyClient) read() {
	sc := bufio.NewScanner(g.c)
	for sc.Scan() {
		var r policyReply
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			break
		}
		g.mu.Lock()
		ch := g.wait[r.ID]
		delete(g.wait, r.ID)
		g.mu.Unlock()
		if ch != nil {
			ch <- r.Allow
		}
	}
	// dal-exec is gone: fail every waiting and later call.
	g.mu.Lock()
	g.broken = true
	for id, ch := range g.wait {
		ch <- false
		delete(g.wait, id)
	}
	g.mu.Unlock()
}

// ask sends call and blocks for the answer; false when the channel broke.
func (g *policyClient) ask(call PolicyCall) bool {
	ch := make(chan bool, 1)
	g.mu.Lock()
	if g.broken {
		g.mu.Unlock()
		return false
	}
	g.next++
	id := g.next
	g.wait[id] = ch
	b, _ := json.Marshal(policyRequest{ID: id, Call: call})
	_, err := g.c.Write(append(b, '\n'))
	g.mu.Unlock()
	if err != nil {
		g.mu.Lock()
		delete(g.wait, id)
		g.mu.Unlock()
		return false
	}
	return <-ch
}

// isExec reports whether nr is an exec the gate holds.
func isExec(nr int32) bool {
	return int(nr) == unix.SYS_EXECVE || int(nr) == unix.SYS_EXECVEAT
}

// policyExec answers an execve/execveat notification (in a goroutine of its
// own: the call may wait for a person while the watcher serves others).
func (w *watcher) policyExec(fd int, n seccompNotif) {
	call, ok := w.readExec(&n)
	id := n.ID
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); errno != 0 {
		return // the caller is gone: nothing to answer
	}
	if ok && missing(call.Path) {
		allow(fd, n.ID) // the kernel fails it (ENOENT): a shell searching PATH
		return
	}
	allow := ok && w.policy.ask(call)
	resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	if !allow {
		resp = seccompNotifResp{ID: n.ID, Error: -int32(unix.EACCES)}
	}
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// missing reports whether the program at p does not exist, as the
// sandbox sees it.
func missing(p string) bool {
	_, err := os.Stat(p)
	return errors.Is(err, os.ErrNotExist)
}

func allow(fd int, id uint64) {
	resp := seccompNotifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

// readExec reads an exec's program, argv and working directory from the
// caller. False when they cannot be read: the call is then refused.
func (w *watcher) readExec(n *seccompNotif) (PolicyCall, bool) {
	pid := int(n.Pid)
	dirfd, pathArg, argvArg := int32(unix.AT_FDCWD), n.Args[0], n.Args[1]
	if int(n.Nr) == unix.SYS_EXECVEAT {
		dirfd, pathArg, argvArg = int32(n.Args[0]), n.Args[1], n.Args[2]
	}
	call := PolicyCall{Kind: "exec"}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return call, false
	}
	call.Cwd = cwd
	path, _, err := readCString(pid, pathArg, unix.PathMax)
	if err != nil {
		return call, false
	}
	if path == "" && int(n.Nr) == unix.SYS_EXECVEAT { // fexecve: the fd names the program
		path, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(int(dirfd)))
	} else if p := resolve(pid, dirfd, path); p != "" {
		path = p
	}
	call.Path = filepath.Clean(path)
	if call.Argv, call.Truncated, err = readArgv(pid, argvArg); err != nil {
		return call, false
	}
	if w.virt != nil {
		call.Stream = w.virt.Stream(pid)
	}
	return call, true
}

// readArgv reads a NULL-terminated array of string pointers.
func readArgv(pid int, addr uint64) ([]string, bool, error) {
	var out []string
	if addr == 0 {
		return out, false, nil
	}
	total := 0
	var ptr [8]byte
	for i := 0; ; i++ {
		if i >= maxArgs || total >= maxArgBytes {
			return out, true, nil
		}
		if err := sysvirt.ReadMem(pid, addr+uint64(8*i), ptr[:]); err != nil {
			return nil, false, err
		}
		p := *(*uint64)(unsafe.Pointer(&ptr[0]))
		if p == 0 {
			return out, false, nil
		}
		s, cut, err := readCString(pid, p, maxArgBytes-total)
		if err != nil {
			return nil, false, err
		}
		out = append(out, s)
		total += len(s) + 1
		if cut {
			return out, true, nil
		}
	}
}

// readCString reads a NUL-terminated string of at most max bytes from
// pid's memory, a page at a time so that an unmapped page after it does
// no harm; cut reports a string longer than max (cut there).
func readCString(pid int, addr uint64, max int) (s string, cut bool, err error) {
	if addr == 0 {
		return "", false, nil
	}
	var out []byte
	buf := make([]byte, 4096)
	for len(out) < max {
		n := 4096 - int(addr%4096)
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(n)
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}
		got, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil || got <= 0 {
			return "", false, fmt.Errorf("read pid %d's memory: %v", pid, err)
		}
		for i, c := range buf[:got] {
			if c == 0 {
				out = append(out, buf[:i]...)
				if len(out) > max {
					return string(out[:max]), true, nil
				}
				return string(out), false, nil
			}
		}
		out = append(out, buf[:got]...)
		addr += uint64(got)
	}
	return string(out[:max]), true, nil
}

// policyConnect takes a connect notification to a loopback address that is
// not exempt, and answers it in a goroutine of its own; false when the
// call is not one the gate holds.
func (w *watcher) policyConnect(fd int, n *seccompNotif) bool {
	addr := loopbackAddr(int(n.Pid), n.Args[1], n.Args[2])
	if addr == "" || w.policy.exempt[addr] || !inetSocket(int(n.Pid), int(n.Args[0])) {
		return false
	}
	nn := *n
	go func() {
		id := nn.ID
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id))); errno != 0 {
			return
		}
		call := PolicyCall{Kind: "connect", Addr: addr}
		if w.virt != nil {
			call.Stream = w.virt.Stream(int(nn.Pid))
		}
		resp := seccompNotifResp{ID: nn.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		if !w.policy.ask(call) {
			resp = seccompNotifResp{ID: nn.ID, Error: -int32(unix.ECONNREFUSED)}
		}
		unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}()
	return true
}

// loopbackAddr is connectAddr's address when it is on this host's
// loopback (or unspecified).
func loopbackAddr(pid int, ptr, size uint64) string {
	if addr, local := connectAddr(pid, ptr, size); local {
		return addr
	}
	return ""
}

// execCalls go to the watcher when a gate is on.
var execCalls = []watched{
	{nr: unix.SYS_EXECVE, name: "execve", dirfd: -1, path: -1, dirfd2: -1, path2: -1, flags: -1},
	{nr: unix.SYS_EXECVEAT, name: "execveat", dirfd: -1, path: -1, dirfd2: -1, path2: -1, flags: -1},
}

// compatExec are execve and execveat of the other ABI (i386 on x86-64,
// arm on arm64), refused with EACCES while a gate is on.
var compatExec = func() []uint32 {
	if compatArch == unix.AUDIT_ARCH_I386 {
		return []uint32{11, 358}
	}
	return []uint32{11, 387}
}()
