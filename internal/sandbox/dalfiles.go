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
	parent    [2]uint64 // the workspace's
	hasParent bool
}

// dalMade finds the inodes the sandbox made for the run: its private file
// systems' roots and, on them, the parents of the workspace (its mount
// point's, when the workspace lives under /tmp), and the workspace's
// parent wherever it is, so that the workspace's ".." shows the run's
// start in every run (sysvirt.Supervisor.DalMade);
// and the workspace's overlay root, which is to show the number of the
// workspace directory under it, wsBefore, instead of the run's fresh
// upper directory's.
func dalMade(sp *spec, wsBefore [2]uint64, haveBefore bool) madeForRun {
	var m madeForRun
	devs := map[uint64]bool{}
	private := privateRoots
	if sp.Direct {
		private = nil // the host's own /tmp and /dev
		if sp.RunDir != "" {
			private = []string{sp.RunDir}
		}
	}
	for _, r := range private {
		if id, ok := inodeOf(r); ok {
			m.inodes = append(m.inodes, id)
			devs[id[0]] = true
		}
	}
	// A path's parents on the private file systems were made for it.
	parents := func(p string) {
		for dir := filepath.Dir(p); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
			if id, ok := inodeOf(dir); ok && devs[id[0]] {
				m.inodes = append(m.inodes, id)
			}
		}
	}
	if !sp.Direct {
		parents(sp.Workspace)
	}
	// The workspace's parent (ls -la's ".."), wherever it is: the host's
	// times of a directory outside the workspace, which dal itself
	// changes between runs (a bundle written beside the workspace), would
	// make the first look at the workspace differ from run to run.
	if id, ok := inodeOf(filepath.Dir(sp.Workspace)); ok {
		m.inodes = append(m.inodes, id)
		m.parent, m.hasParent = id, true
	}
	// What dal shows at paths of its own (the proxy's certificates, the
	// marks directory, dald's socket): staged before the run began.
	for _, t := range mountTargets(sp) {
		if id, ok := inodeOf(t); ok {
			m.inodes = append(m.inodes, id)
		}
		parents(t)
	}
	if root, ok := inodeOf(sp.Workspace); ok && haveBefore && root != wsBefore && !sp.Direct {
		m.root, m.was, m.alias = root, wsBefore, true
	}
	return m
}

// mountTargets are the paths where sp shows dal's own files.
func mountTargets(sp *spec) []string {
	var out []string
	for _, m := range sp.Mounts {
		out = append(out, filepath.Clean(m.Target))
	}
	for _, m := range sp.SocketsAt {
		out = append(out, filepath.Clean(m.Target))
	}
	return out
}

// tell hands m to the syscall layer.
func (m madeForRun) tell(v *sysvirt.Supervisor) {
	v.DalMade(m.inodes)
	if m.alias {
		v.AliasInode(m.root[0], m.root[1], m.was[1])
	}
	if m.hasParent {
		v.Outside(m.parent[0], m.parent[1])
	}
}
