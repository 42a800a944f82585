package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/seedrng"
)

// The kernel's random UUIDs in /proc, served from the seed when the
// sandbox's randomness is virtual (as /dev/urandom is, see seedDeviceAt).
// /proc/sys/kernel/random becomes a read-only directory of dal's:
//
//   - uuid, a fresh UUID at each open (the shell's way to make one: cat
//     /proc/sys/kernel/random/uuid), is a FIFO. The init opens it for
//     writing, which waits for a reader; once one came, a fresh FIFO is
//     renamed over the name for the next reader, and the first gets one
//     UUID of the "proc/uuid" stream and the end of the file. Two readers
//     opening within the few microseconds before the rename share one
//     UUID (one of them reads nothing);
//   - boot_id, fixed for the boot, holds the "proc/boot_id" stream's UUID;
//   - entropy_avail, poolsize and the two thresholds are copies of the
//     host's values (they are constants on Linux 5.18 and later).
//
// The directory is a tmpfs attached nowhere else: the init changes it
// through its own descriptor, the agent sees it only read-only.

const procRandom = "/proc/sys/kernel/random"

// seedProcRandom mounts the seeded directory over /proc's. It runs after
// mountProc, before the agent starts.
func seedProcRandom(seed uint64) error {
	fail := func(err error) error {
		return fmt.Errorf("sandbox: serve %s from the seed: %v", procRandom, err)
	}
	dir, err := detachedTmpfs()
	if err != nil {
		return fail(err)
	}
	ents, err := os.ReadDir(procRandom)
	if err != nil {
		unix.Close(dir)
		return fail(err)
	}
	for _, e := range ents {
		var b []byte
		switch e.Name() {
		case "uuid":
			err = unix.Mknodat(dir, "uuid", unix.S_IFIFO|0o444, 0)
		case "boot_id":
			err = writeAt(dir, "boot_id", uuidFrom(seedrng.Derive(seed, "proc/boot_id")))
		default:
			if b, err = os.ReadFile(procRandom + "/" + e.Name()); err == nil {
				err = writeAt(dir, e.Name(), b)
			}
		}
		if err != nil {
			unix.Close(dir)
			return fail(err)
		}
	}
	if err := mountOver(dir, procRandom); err != nil {
		unix.Close(dir)
		return fail(err)
	}
	go serveUUIDs(dir, seedrng.Derive(seed, "proc/uuid"))
	return nil
}

// serveUUIDs gives each reader of the FIFO "uuid" in dir one UUID.
func serveUUIDs(dir int, src *seedrng.Stream) {
	defer unix.Close(dir)
	for {
		fd, err := unix.Openat(dir, "uuid", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		// The next reader gets a FIFO of its own.
		if unix.Mknodat(dir, ".uuid", unix.S_IFIFO|0o444, 0) != nil || unix.Renameat(dir, ".uuid", dir, "uuid") != nil {
			unix.Close(fd)
			return
		}
		line := uuidFrom(src)
		for b := line; len(b) > 0; {
			n, err := unix.Write(fd, b)
			if err != nil && err != unix.EINTR {
				break // the reader went away: its UUID is spent
			}
			if n > 0 {
				b = b[n:]
			}
		}
		unix.Close(fd)
	}
}

// uuidFrom formats the next 16 bytes of src as a version 4 UUID and a
// newline, as the kernel prints them.
func uuidFrom(src *seedrng.Stream) []byte {
	var b [16]byte
	src.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Appendf(nil, "%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// detachedTmpfs makes a small tmpfs that is attached nowhere and returns
// its root.
func detachedTmpfs() (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "size", "64k"); err != nil {
		return -1, err
	}
	if err := unix.FsconfigSetString(fs, "mode", "0555"); err != nil {
		return -1, err
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

func writeAt(dir int, name string, b []byte) error {
	fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, b)
	return err
}

// mountOver mounts the directory dir (a detached mount's root),
// read-only, over target.
func mountOver(dir int, target string) error {
	fd, err := unix.OpenTree(dir, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return err
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
}
