package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// loopbackUp brings up the loopback interface of the init's fresh network
// namespace (it starts down, with 127.0.0.1 and ::1 unusable).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: open a socket to configure loopback: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("sandbox: name the loopback interface: %v", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("sandbox: read the loopback interface's flags: %v", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("sandbox: bring up the loopback interface: %v", err)
	}
	return nil
}
