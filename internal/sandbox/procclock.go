package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Under a virtual clock (strict mode) /proc/uptime and /proc/loadavg are
// the virtual machine's, the same in every run and on every host, instead
// of the host's (a tool that prints its uptime or load would never
// repeat):
//
//   - /proc/uptime shows the virtual monotonic clock's origin, the
//     uptime at the run's start (CLOCK_BOOTTIME reads start there), for
//     both fields (time up and idle time of one CPU); it does not advance;
//   - /proc/loadavg shows no load, one process running of one, the last
//     pid the agent's, 100.
//
// Both are regular files of a tmpfs attached nowhere else, bound
// read-only over /proc's (a program that keeps the file open and seeks
// back reads the same again).

// virtualProcClock mounts them. It runs after mountProc.
func virtualProcClock(monoNS int64) error {
	fail := func(err error) error {
		return fmt.Errorf("sandbox: serve /proc/uptime and /proc/loadavg from the virtual clock: %v", err)
	}
	dir, err := detachedTmpfs()
	if err != nil {
		return fail(err)
	}
	defer unix.Close(dir)
	up := fmt.Sprintf("%d.%02d", monoNS/1e9, monoNS%1e9/1e7)
	files := [][2]string{
		{"uptime", up + " " + up + "\n"},
		{"loadavg", fmt.Sprintf("0.00 0.00 0.00 1/1 %d\n", agentPID)},
	}
	for _, f := range files {
		if err := writeAt(dir, f[0], []byte(f[1])); err != nil {
			return fail(err)
		}
		fd, err := unix.OpenTree(dir, f[0], unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return fail(err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
		if err == nil {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, "/proc/"+f[0], unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil {
			return fail(err)
		}
	}
	return nil
}
