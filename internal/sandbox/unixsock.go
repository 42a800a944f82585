package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Host Unix sockets. A Unix socket bound to a path is reached through the
// file system, whatever the network namespace, and a read-only mount does
// not stop a connect: with the host's tree visible, an agent could talk
// to docker, dbus, a database or an ssh agent listening on the host. So
// the sandbox
//
//   - covers the directories where services keep their sockets — /run,
//     /var/run when it is a directory of its own, /var/tmp, besides /tmp and
//     /dev/shm — with private tmpfs ([Config.PrivateTmp]);
//   - masks every other socket bound in dal-exec's network namespace when
//     the sandbox starts (listed in /proc/PID/net/unix) with /dev/null, so
//     a connect there gets ECONNREFUSED. [Config.Sockets] are dal's own and
//     stay; a socket in the workspace is reached through the overlay, which
//     refuses connects by itself.
//
// A socket the host binds after the sandbox started, outside those
// directories, is not masked: SECURITY.md says so.

// privateDirs are covered with a tmpfs of their own when PrivateTmp is set
// (/tmp and /dev/shm elsewhere), with the mode each gets.
var privateDirs = []struct {
	path string
	mode string
}{{"/var/tmp", "mode=1777"}, {"/run", "mode=0755"}, {"/var/run", "mode=0755"}}

// UnderPrivateDir reports whether the absolute path p lies in a directory
// the sandbox replaces with a private one (PrivateTmp): a Unix socket
// there can only be one the sandbox made.
func UnderPrivateDir(p string) bool {
	if within(p, "/tmp") || within(p, "/dev/shm") {
		return true
	}
	for _, d := range privateDirs {
		if within(p, d.path) {
			return true
		}
	}
	return false
}

// mountPrivateDirs mounts the private tmpfs on /var/tmp, /run and /var/run
// (when it is a directory, not Debian's link to /run), with the size
// option size ("" or ",size=N").
func mountPrivateDirs(size string) error {
	for _, d := range privateDirs {
		fi, err := os.Lstat(d.path)
		if err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", d.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, d.mode+size); err != nil {
			return fmt.Errorf("sandbox: mount a private %s: %v", d.path, err)
		}
	}
	return nil
}

// hostSockets lists the absolute paths of the Unix sockets bound in the
// network namespace of process pid (dal-exec), read from its
// /proc/PID/net/unix while the host's /proc is still mounted.
func hostSockets(pid int) ([]string, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/net/unix")
	if err != nil {
		return nil, fmt.Errorf("sandbox: list the host's Unix sockets: %v", err)
	}
	defer f.Close()
	return parseUnixTable(f)
}

// parseUnixTable reads /proc/net/unix: the path, when there is one, is
// the rest of a line after the inode; abstract names start with '@' and
// relative paths name nothing we can find.
func parseUnixTable(r io.Reader) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, " /")
		if i < 0 {
			continue
		}
		p := filepath.Clean(line[i+1:])
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: list the host's Unix sockets: %v", err)
	}
	return out, nil
}

// maskSockets mounts /dev/null over each path that is still a Unix socket
// in the finished tree, except dal's own sockets, those in the private
// directories and those in the workspace. A path is opened without
// following its last component; whatever is not a socket is left alone.
func maskSockets(paths []string, sp *spec) error {
	keep := map[string]bool{}
	for _, s := range sp.Sockets {
		keep[filepath.Clean(s)] = true
	}
	for _, m := range sp.SocketsAt {
		keep[filepath.Clean(m.Source)] = true
	}
	for _, p := range paths {
		if keep[p] || (sp.PrivateTmp && UnderPrivateDir(p)) || within(p, sp.Workspace) {
			continue
		}
		if err := maskSocket(p); err != nil {
			return err
		}
	}
	return nil
}

func maskSocket(p string) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // gone, or not reachable from here
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil
	}
	null, err := unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sandbox: mask the host socket %s: %v", p, err)
	}
	defer unix.Close(null)
	if err := unix.MoveMount(null, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: mask the host socket %s: %v", p, err)
	}
	return nil
}
