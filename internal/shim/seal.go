package shim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The seal: what the installed tree looked like when it last passed the
// full check ([verify]), so that the next runs check it with a stat of
// each entry (about 50, some tens of microseconds) instead of reading and
// comparing every file (about a megabyte, 2 ms of CPU at every run).
//
// It records, for the tree's root, each directory and each file, the
// device, inode, mode, owner, size, modification and change times. Any
// write to a file changes its change time (ctime), which no unprivileged
// process can set back; adding, removing or renaming an entry changes
// its directory's times; replacing a file or a directory changes its
// inode. So a tree whose every entry stats as sealed holds what the full
// check saw. A kernel whose timestamps are coarse (before Linux 6.13's
// fine-grained ones, or on a file system without them) gives a change in
// the same tick as the seal's stat the same ctime: entries changed less
// than sealWindow before the seal was made are not trusted by it (the
// full check runs, and seals again), as git does with racily clean files.
//
// It sits beside the tree (.<digest>.seal in the base), not in it: writing
// it would change the tree's root. Like the manifest it is the user's
// file: someone who can write the user's cache can forge it, the limit the
// package comment states; the sandbox shows the tree read-only.

// sealWindow is how long before its seal an entry must have last changed
// for the seal to vouch for it: well above the coarsest timestamp tick (a
// jiffy, 10 ms at HZ=100).
const sealWindow = 2 * time.Second

// sealVersion is the seal's format, on its first line with the digest and
// the time it was made.
const sealVersion = "dal-shim-seal-v1"

// sealPath is the seal of the tree dir.
func sealPath(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".seal")
}

// sealKey is what the seal records of an entry.
type sealKey struct {
	dev, ino           uint64
	mode, uid          uint32
	size, mtime, ctime int64
}

func keyOf(st *unix.Stat_t) sealKey {
	return sealKey{dev: st.Dev, ino: st.Ino, mode: st.Mode, uid: st.Uid, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

func (k sealKey) String() string {
	return fmt.Sprintf("%d %d %d %d %d %d %d", k.dev, k.ino, k.mode, k.uid, k.size, k.mtime, k.ctime)
}

// sealLine is the seal's line for the entry rel below the tree's root
// ("" for the root) with the stat st.
func sealLine(st *unix.Stat_t, rel string) string {
	if rel == "" {
		rel = "."
	}
	return keyOf(st).String() + " " + rel + "\n"
}

// seal records lines, what [verify] saw of the tree dir as it passed the
// check (each entry's stat made before it was read), in the tree's seal,
// replacing the one there in one rename. An entry that changed since has
// another change time than the seal says.
func seal(dir, lines string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d %d\n", sealVersion, Digest(), time.Now().UnixNano(), strings.Count(lines, "\n"))
	b.WriteString(lines)
	f, err := os.CreateTemp(filepath.Dir(dir), ".seal-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), sealPath(dir))
}

// errUnsealed says the seal does not vouch for the tree: the full check
// decides.
var errUnsealed = errors.New("the installed shims are not as sealed")

// sealed checks the tree dir against its seal, without following a
// symbolic link: nil means the seal is whole and names every shipped file
// and directory, every entry stats as sealed, none changed within window
// before the seal was made, and the tree can be used as it is.
func sealed(dir string, window time.Duration) error {
	b, _, err := readAt(unix.AT_FDCWD, sealPath(dir), true)
	if err != nil {
		return err
	}
	head, rest, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(head)
	if len(f) != 4 || f[0] != sealVersion || f[1] != Digest() || f[3] != strconv.Itoa(strings.Count(rest, "\n")) {
		return errUnsealed
	}
	at, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return errUnsealed
	}
	tree := shippedOnce()
	trusted := at - window.Nanoseconds() // changed before this: vouched for
	root, err := openDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fd := int(root.Fd())
	shipped := 0 // the entries of tree among them
	for _, l := range strings.Split(rest, "\n") {
		if l == "" {
			continue
		}
		f := strings.SplitN(l, " ", 8)
		if len(f) != 8 {
			return errUnsealed
		}
		var st unix.Stat_t
		if f[7] == "." {
			err = unix.Fstat(fd, &st)
		} else {
			err = unix.Fstatat(fd, f[7], &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return errUnsealed
		}
		k := keyOf(&st)
		if k.String() != strings.Join(f[:7], " ") || k.ctime >= trusted || k.mtime >= trusted ||
			int(k.uid) != os.Getuid() || k.mode&0o022 != 0 {
			return errUnsealed
		}
		if _, ok := tree.files[f[7]]; ok || tree.dirs[f[7]] {
			shipped++
		}
	}
	if shipped != len(tree.files)+len(tree.dirs) {
		return errUnsealed
	}
	return nil
}
