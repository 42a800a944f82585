package sandbox

import (
	"path/filepath"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// privateRoots are the file systems an overlay sandbox makes for the run
// (mount.go, dev.go).
var privateRoots = []string{"/tmp", "/var/tmp", "/run", "/dev", "/dev/shm"}

// inodeOf is path's device and inode number, without following a link.
func inodeOf(path string) ([2]uint64, bool) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return [2]uint64{}, false
	}
	return [2]uint64{st.Dev, st.Ino}, true
}

// madeForRun is what the sandbox made for the run, found after its mounts
// (dalMade) and told to the syscall layer (tell).
type madeForRun struct {
	inodes    [][2]uint64
	root, was [2]uint64
	alias     bool
}

// dalMade finds the inodes the sandbox made for the run: its private file
// systems' roots and, on them, the parents of the workspace (its mount
// point's, when the workspace lives under /tmp), so that the workspace's
// ".." shows the run's start in every run (sysvirt.Supervisor.DalMade);
// and the workspace's overlay root, which is to show the number of the
// workspace directory under it, wsBefore, instead of the run's fresh
// upper directory's.
func dalMade(sp *spec, wsBefore [2]uint64, haveBefore bool) madeForRun {
	var m madeForRun
	devs := map[uint64]bool{}
	for _, r := range privateRoots {
		if id, ok := inodeOf(r); ok {
			m.inodes = append(m.inodes, id)
			devs[id[0]] = true
		}
	}
	for dir := filepath.Dir(sp.Workspace); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if id, ok := inodeOf(dir); ok && devs[id[0]] {
			m.inodes = append(m.inodes, id)
		}
	}
	if root, ok := inodeOf(sp.Workspace); ok && haveBefore && root != wsBefore {
		m.root, m.was, m.alias = root, wsBefore, true
	}
	return m
}

// tell hands m to the syscall layer.
func (m madeForRun) tell(v *sysvirt.Supervisor) {
	v.DalMade(m.inodes)
	if m.alias {
		v.AliasInode(m.root[0], m.root[1], m.was[1])
	}
}
