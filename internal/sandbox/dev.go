package sandbox

import (
	"errors"
	"fmt"
	"os"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/seedrng"
	"golang.org/x/sys/unix"
)

// devices are the host's device nodes the sandbox's /dev shows, the
// character devices of runc's default list: no block device, no other
// character device (mem, kmsg, loop-control, kvm...).
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the symbolic links of the sandbox's /dev.
var devLinks = [][2]string{
	{"ptmx", "pts/ptmx"},
	{"fd", "/proc/self/fd"},
	{"stdin", "/proc/self/fd/0"},
	{"stdout", "/proc/self/fd/1"},
	{"stderr", "/proc/self/fd/2"},
}

// device is a detached bind mount of one host device node.
type device struct {
	name string
	fd   int
}

// cloneDevices takes detached bind mounts of the host's device nodes,
// before the sandbox's /dev covers the host's. A node the host lacks is
// left out. Each is read-only as a mount (the agent, uid 0, owns the
// host's nodes and could chmod them otherwise; reads and writes of a
// device do not depend on the mount), nosuid and noexec, and allows
// device access where the rest of the tree is nodev.
func cloneDevices() ([]device, error) {
	var out []device
	for _, name := range devices {
		p := "/dev/" + name
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			closeDevices(out)
			return nil, fmt.Errorf("sandbox: the host's %s cannot be shown in the sandbox: %v", p, err)
		}
		out = append(out, device{name: name, fd: fd})
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			closeDevices(out)
			return nil, fmt.Errorf("sandbox: the host's %s is not a character device", p)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC, Attr_clr: unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			closeDevices(out)
			return nil, fmt.Errorf("sandbox: set the mount flags of %s: %v", p, err)
		}
	}
	return out, nil
}

func closeDevices(ds []device) {
	for _, d := range ds {
		unix.Close(d.fd)
	}
}

// mountDev covers /dev with the sandbox's own: a tmpfs holding the nodes
// from [cloneDevices], a private devpts instance (ptys the agent opens
// are its own; the host's are not there), a private /dev/shm and the
// usual links. The tmpfs is read-only once built: the agent cannot add a
// node (it has no CAP_MKNOD either) or replace a link. It consumes devs.
func mountDev(devs []device, virt sysvirt.Config, shmSize string) error {
	defer closeDevices(devs)
	const tmpfsFlags = unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", tmpfsFlags, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("sandbox: mount the sandbox's /dev: %v", err)
	}
	for _, d := range devs {
		if virt.Random && seededDevice(d.name) {
			continue
		}
		p := "/dev/" + d.name
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("sandbox: no mount point for %s: %v", p, err)
		}
		unix.Close(fd)
		if err := unix.MoveMount(d.fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("sandbox: mount %s: %v", p, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("sandbox: create %s: %v", d, err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("sandbox: mount a private /dev/pts: %v", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"+shmSize); err != nil {
		return fmt.Errorf("sandbox: mount a private /dev/shm: %v", err)
	}
	if virt.Random {
		dev, err := unix.Open("/dev", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open the sandbox's /dev: %v", err)
		}
		defer unix.Close(dev)
		for _, name := range []string{"random", "urandom"} {
			if err := seedDeviceAt(dev, name, virt.Seed); err != nil {
				return err
			}
		}
	}
	for _, l := range devLinks {
		if err := unix.Symlink(l[1], "/dev/"+l[0]); err != nil {
			return fmt.Errorf("sandbox: create /dev/%s: %v", l[0], err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/dev", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("sandbox: make /dev read-only: %v", err)
	}
	return nil
}

func seededDevice(name string) bool { return name == "random" || name == "urandom" }

// seedDeviceAt makes name in the directory dir a FIFO that the init keeps
// full of the bytes of stream (seed, "dev/"+name), to show as /dev/name:
// a program that reads /dev/urandom, like one that calls getrandom, gets
// the seed's bytes. Readers share the stream in the order they read it,
// so the bytes each gets are fixed when they read one after another (a
// pipeline, a script); concurrent readers split it as the scheduler
// decides. fstat shows a FIFO, not a character device.
func seedDeviceAt(dir int, name string, seed uint64) error {
	p := "/dev/" + name
	if err := unix.Mknodat(dir, name, unix.S_IFIFO|0o666, 0); err != nil {
		return fmt.Errorf("sandbox: create the seeded %s: %v", p, err)
	}
	if err := unix.Fchmodat(dir, name, 0o666, 0); err != nil {
		return fmt.Errorf("sandbox: open the seeded %s to all: %v", p, err)
	}
	fd, err := unix.Openat(dir, name, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("sandbox: open the seeded %s: %v", p, err)
	}
	// A page of buffer, not the pipe's 64 kB: the writer fills it at once,
	// and most agents read a few bytes or none (a larger read takes turns
	// with the writer, a page at a time). The bytes are the same either way.
	unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, os.Getpagesize())
	// Written through the runtime's poller, not in a blocking write: a
	// writer blocked in the kernel would hold an OS thread for the whole
	// run, and the threads the init needs while the agent runs are
	// started before it (warmThreads).
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("sandbox: open the seeded %s: %v", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	go func() {
		src := seedrng.Derive(seed, "dev/"+name)
		buf := make([]byte, 4096)
		for {
			src.Read(buf)
			if _, err := f.Write(buf); err != nil {
				return
			}
		}
	}()
	return nil
}
