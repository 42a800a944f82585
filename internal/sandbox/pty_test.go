package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/dal-runtime/dal/internal/termsafe"
	"golang.org/x/sys/unix"
)

// newPty opens a pty pair on the host: the test's stand-in for the
// caller's terminal (pts) and the terminal emulator behind it (ptm).
func newPty(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptm, pts
}

// queuedInput returns what waits in the input queue of the terminal pts, as
// a shell reading it next would get it.
func queuedInput(t *testing.T, pts *os.File) string {
	t.Helper()
	fd := int(pts.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	raw := *tio
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 0, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, tio)
	buf := make([]byte, 4096)
	n, _ := unix.Read(fd, buf)
	return string(buf[:max(n, 0)])
}

// agentTiocsti pushes a command into every terminal it can name: fds 0, 1
// and 2 and /dev/tty; prints each result, the devices behind fds 0-2, and
// what its own terminal input holds.
func agentTiocsti([]string) int {
	targets := []struct {
		name string
		fd   int
	}{{"fd0", 0}, {"fd1", 1}, {"fd2", 2}}
	if fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		targets = append(targets, struct {
			name string
			fd   int
		}{"/dev/tty", fd})
	} else {
		fmt.Printf("open /dev/tty: %s\n", errName(err))
	}
	for _, tg := range targets {
		var err error
		for _, c := range []byte("echo INJECTED\n") {
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(tg.fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); e != 0 {
				err = e
				break
			}
		}
		fmt.Printf("TIOCSTI %s: %s\n", tg.name, errName(err))
	}
	// A pty's number is its instance's: dev tells the instances apart.
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		fmt.Printf("rdev %d: %d:%d\n", fd, st.Dev, st.Rdev)
	}
	if termsafe.IsTerminal(0) {
		unix.SetNonblock(0, true)
		buf := make([]byte, 64)
		n, err := unix.Read(0, buf)
		fmt.Printf("stdin: %q %s\n", buf[:max(n, 0)], errName(err))
	}
	return 0
}

// TestNoTerminalInjection: an agent run from a terminal cannot push input
// into it. It holds no descriptor of the caller's terminal (a pty of the
// sandbox stands in), has no controlling terminal but that pty, and
// TIOCSTI fails everywhere; after the run nothing waits in the caller's
// input for its shell to execute. The caller's modes are restored.
func TestNoTerminalInjection(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); err == nil && strings.TrimSpace(string(b)) == "0" {
		t.Log("dev.tty.legacy_tiocsti=0: the kernel refuses TIOCSTI without CAP_SYS_ADMIN anyway")
	}
	for _, tc := range []struct {
		name  string
		stdin bool // the caller's stdin is the terminal too (else /dev/null)
	}{{"stdin-stdout-stderr", true}, {"stdout-stderr", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ptm, pts := newPty(t)
			before, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			var host unix.Stat_t
			if err := unix.Fstat(int(pts.Fd()), &host); err != nil {
				t.Fatal(err)
			}
			cfg := newConfig(t, nil)
			cmd := agentCommand(t, cfg, "tiocsti")
			cmd.Stdout, cmd.Stderr = pts, pts
			cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 1
			if tc.stdin {
				cmd.Stdin = pts
			}
			out := make(chan string, 1)
			go func() {
				var b strings.Builder
				r := bufio.NewReader(ptm)
				for {
					l, err := r.ReadString('\n')
					b.WriteString(l)
					if err != nil || strings.HasPrefix(l, "stdin:") || strings.HasPrefix(l, "rdev 2:") && !tc.stdin {
						break
					}
				}
				out <- b.String()
			}()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("agent: %v", err)
			}
			var said string
			select {
			case said = <-out:
			case <-time.After(10 * time.Second):
				t.Fatal("the agent's output never reached the caller's terminal")
			}
			said = strings.ReplaceAll(said, "\r\n", "\n")
			for _, w := range []string{"TIOCSTI fd0: ", "TIOCSTI fd1: EPERM", "TIOCSTI fd2: EPERM", "TIOCSTI /dev/tty: EPERM"} {
				if !strings.Contains(said, w) {
					t.Errorf("the agent's attempts: want %q in\n%s", w, said)
				}
			}
			if strings.Contains(said, ": ok\n") {
				t.Errorf("an injection succeeded:\n%s", said)
			}
			if strings.Contains(said, fmt.Sprintf(": %d:%d\n", host.Dev, host.Rdev)) {
				t.Errorf("the agent holds the caller's terminal (%d:%d):\n%s", host.Dev, host.Rdev, said)
			}
			if tc.stdin && !strings.Contains(said, `stdin: "" EAGAIN`) {
				t.Errorf("the agent's own terminal received input:\n%s", said)
			}
			if got := queuedInput(t, pts); got != "" {
				t.Errorf("the caller's shell would read %q after the run", got)
			}
			after, _ := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
			if *after != *before {
				t.Errorf("the caller's terminal modes were not restored: %+v, want %+v", after, before)
			}
			// The check above can see an injection: the test's own (it has
			// CAP_SYS_ADMIN) is there. Rootless, nobody can inject.
			if os.Geteuid() != 0 {
				return
			}
			c := byte('X')
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, pts.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); e != 0 {
				t.Fatalf("TIOCSTI from the test: %v", e)
			}
			if got := queuedInput(t, pts); got != "X" {
				t.Fatalf("the check does not see an injection: %q", got)
			}
		})
	}
}

// TestTerminalResize: the caller's window size reaches the agent's pty at
// the start and on every SIGWINCH.
func TestTerminalResize(t *testing.T) {
	t.Parallel()
	ptm, pts := newPty(t)
	if err := unix.IoctlSetWinsize(int(ptm.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100}); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(t, nil)
	cmd := command(t, cfg, `stty size; trap 'stty size; exit 0' WINCH; echo ready; sleep 1000 & wait`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		r := bufio.NewReader(ptm)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimRight(l, "\r\n")
		}
	}()
	expect := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the agent ended before saying %q", want)
				}
				if l == want {
					return
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("the agent never said %q", want)
			}
		}
	}
	expect("30 100")
	expect("ready")
	if err := unix.IoctlSetWinsize(int(ptm.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 77}); err != nil {
		t.Fatal(err)
	}
	expect("33 77")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent: %v", err)
	}
}
