package termsafe

import "golang.org/x/sys/unix"

// IsTerminal reports whether fd is a terminal: whether the TCGETS ioctl
// succeeds on it. It is dal's one terminal check (the sandbox's init asks
// it of fds 0–2 to decide on a pty, dal-exec of the agent's stdin and of
// its own output).
func IsTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
