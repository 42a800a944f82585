package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/internal/termsafe"
	"golang.org/x/sys/unix"
)

// terminal is the pty the agent runs on when one of the init's standard
// descriptors is the caller's terminal. The agent gets the pty's far end
// in place of every such descriptor and never holds the caller's
// terminal: it cannot push input into it (TIOCSTI), change its modes or
// read it in the background. The init relays between the two: keystrokes
// from the caller's terminal (raw while relaying, so the pty's line
// discipline edits, echoes and turns ^C into SIGINT for the agent), the
// pty's output back, and the window size on SIGWINCH.
//
// The relay's threads block SIGTTIN and SIGTTOU: the init is the PID
// namespace's init, which the kernel's job-control signals cannot stop, so
// a read from the background would otherwise retry for ever. There a read
// fails instead and the relay waits for SIGCONT (the shell's fg).
type terminal struct {
	master int // the pty's near end, read and written by the relay
	peer   int // the far end, kept open until the agent's tree is gone
	caller int // the caller's terminal the relay writes to; -1 for none
	input  bool
	// rawOutput: every descriptor the agent writes to the caller's
	// terminal goes through the pty, so output processing is the pty's
	// alone; else dal-exec's own writes (the agent's piped stdout) still
	// need the caller's (\n to \r\n).
	rawOutput bool
	done      chan struct{} // closed when the pty's output is drained

	mu    sync.Mutex
	saved *unix.Termios // the caller's modes while raw, to restore
	over  bool          // restored for good: never raw again
}

// openTerminal allocates a pty in the sandbox's devpts when one of fds 0,
// 1 and 2 is a terminal, with the caller's modes and window size; nil
// when none is.
func openTerminal() (*terminal, error) {
	ref := -1
	for _, fd := range []int{0, 1, 2} {
		if termsafe.IsTerminal(fd) {
			ref = fd
			break
		}
	}
	if ref < 0 {
		return nil, nil
	}
	master, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: allocate the agent's terminal: %v", err)
	}
	t := &terminal{master: master, peer: -1, caller: -1, input: termsafe.IsTerminal(0), done: make(chan struct{})}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		t.close()
		return nil, fmt.Errorf("sandbox: unlock the agent's terminal: %v", err)
	}
	peer, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		t.close()
		return nil, fmt.Errorf("sandbox: open the agent's terminal: %v", errno)
	}
	t.peer = int(peer)
	if tio, err := unix.IoctlGetTermios(ref, unix.TCGETS); err == nil {
		unix.IoctlSetTermios(t.peer, unix.TCSETS, tio)
	}
	t.resize(ref)
	for _, fd := range []int{1, 2, 0} {
		if termsafe.IsTerminal(fd) && writable(fd) {
			t.caller = fd
			break
		}
	}
	t.rawOutput = termsafe.IsTerminal(1) && termsafe.IsTerminal(2)
	return t, nil
}

// writable reports whether fd was opened for writing.
func writable(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE != unix.O_RDONLY
}

// files are the agent's fds 0, 1 and 2: the pty in place of a terminal.
func (t *terminal) files() []uintptr {
	out := []uintptr{0, 1, 2}
	if t == nil {
		return out
	}
	for i := range out {
		if termsafe.IsTerminal(i) {
			out[i] = uintptr(t.peer)
		}
	}
	return out
}

// ctty is the agent's descriptor that becomes its controlling terminal.
func (t *terminal) ctty() int {
	for i, f := range t.files() {
		if f == uintptr(t.peer) {
			return i
		}
	}
	return 0
}

// start runs the relay. It returns at once.
func (t *terminal) start() {
	go t.output()
	if t.input {
		go t.keys()
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, unix.SIGWINCH)
	go func() {
		for range winch {
			t.resize(0)
		}
	}()
}

// resize copies the window size of the caller's terminal on fd to the
// pty, which signals the agent's foreground group.
func (t *terminal) resize(fd int) {
	if !termsafe.IsTerminal(fd) {
		fd = t.caller
	}
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		unix.IoctlSetWinsize(t.master, unix.TIOCSWINSZ, ws)
	}
}

// jobControlFree blocks SIGTTIN and SIGTTOU on the calling goroutine's
// thread, which it locks for good (the thread dies with the goroutine).
func jobControlFree() {
	runtime.LockOSThread()
	var set unix.Sigset_t
	for _, s := range []syscall.Signal{unix.SIGTTIN, unix.SIGTTOU} {
		set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil)
}

// output copies what the agent writes to the pty to the caller's terminal
// until every far end is closed.
func (t *terminal) output() {
	jobControlFree()
	defer close(t.done)
	buf := make([]byte, 32*1024)
	for {
		n, err := readSome(t.master, buf)
		if n > 0 && t.caller >= 0 {
			writeAll(t.caller, buf[:n])
		}
		if err != nil || n == 0 {
			return // EIO: the agent's tree is gone
		}
	}
}

// keys copies the caller's keystrokes to the pty, in raw mode, while the
// init's group is the terminal's foreground group.
func (t *terminal) keys() {
	jobControlFree()
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, unix.SIGCONT)
	buf := make([]byte, 4096)
	for mode := true; ; {
		if !foreground(0) {
			<-cont
			continue
		}
		// Raw at the start and after each return to the foreground (the
		// shell restores its own modes when it takes the terminal).
		if mode && !t.raw() {
			return
		}
		n, err := readSome(0, buf)
		if n > 0 {
			writeAll(t.master, buf[:n])
		}
		mode = false
		switch {
		case errors.Is(err, unix.EIO):
			// Put in the background: wait to be brought back.
			<-cont
			mode = true
		case err != nil || n == 0:
			return // hung up
		}
	}
}

// raw puts the caller's terminal (fd 0) in raw mode, saving its modes
// the first time; false once the run is over.
func (t *terminal) raw() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over {
		return false
	}
	cur, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return false
	}
	if t.saved == nil {
		saved := *cur
		t.saved = &saved
	}
	r := *cur
	r.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	r.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	r.Cflag &^= unix.CSIZE | unix.PARENB
	r.Cflag |= unix.CS8
	if t.rawOutput {
		r.Oflag &^= unix.OPOST
	}
	r.Cc[unix.VMIN], r.Cc[unix.VTIME] = 1, 0
	// TCSETS, not TCSETSF: what was typed ahead is kept for the agent.
	return unix.IoctlSetTermios(0, unix.TCSETS, &r) == nil
}

// finish waits until the pty's output is drained, once the agent and
// every process of the sandbox are gone, and gives the caller's terminal
// its modes back.
func (t *terminal) finish() {
	unix.Close(t.peer)
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	t.over = true
	if t.saved != nil {
		signal.Ignore(unix.SIGTTOU)
		unix.IoctlSetTermios(0, unix.TCSETS, t.saved)
	}
}

func (t *terminal) close() {
	unix.Close(t.master)
	if t.peer >= 0 {
		unix.Close(t.peer)
	}
}

// foreground reports whether the init may use the terminal on fd without
// job control stopping it: its group is the foreground group, or the
// terminal is not the init's controlling terminal at all.
func foreground(fd int) bool {
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if errors.Is(err, unix.ENOTTY) {
		return termsafe.IsTerminal(fd)
	}
	return err == nil && pg == unix.Getpgrp()
}

// readSome reads into buf, waiting when fd is non-blocking (the caller's
// terminal may be: the flag belongs to the open file, shared with the
// shell).
func readSome(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
		case unix.EAGAIN:
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		default:
			return 0, err
		}
	}
}

// writeAll writes b to fd, waiting when fd is non-blocking.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch err {
		case nil:
			b = b[n:]
		case unix.EINTR:
		case unix.EAGAIN:
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, -1)
		default:
			return err
		}
	}
	return nil
}
