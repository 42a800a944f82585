package sysvirt

import "golang.org/x/sys/unix"

// What the sandbox made for the run, told apart from what the agent made
// (filetimes.go), where the kernel's coarse timestamps cannot tell them
// apart: the init creates the workspace's mount point and its parents on
// the sandbox's private /tmp a moment before it starts the agent, often
// in the same 4 ms tick as the agent's first image, and then the
// workspace's parent (ls -la's "..") showed the run's start in one run
// and the first look's virtual time in the next. And the overlay's root
// directory, the workspace itself, has the inode number of the run's
// fresh upper directory: another number in every run.

// inodeID is an inode by device and number.
type inodeID struct{ dev, ino uint64 }

// DalMade tells the supervisor the inodes the sandbox made for the run
// (its private file systems' roots, the mount points it created there and
// their parents), before it starts the agent: their values up to now show
// the run's start, whenever they are seen, and they keep their numbers.
func (s *Supervisor) DalMade(inodes [][2]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files
	if f.dal == nil {
		f.dal = map[inodeID]bool{}
	}
	for _, i := range inodes {
		f.dal[inodeID{i[0], i[1]}] = true
	}
	// The precise clock: what was written before now has a time at or
	// before it, coarse or (multigrain timestamps, Linux 6.13) fine.
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &ts)
	f.dalUntil = ts.Nano()
}

// AliasInode makes inode (dev, ino) show number as: the workspace's overlay
// root shows the number of the workspace directory under it, the same in
// every run over that workspace.
func (s *Supervisor) AliasInode(dev, ino, as uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files.aliases == nil {
		s.files.aliases = map[inodeID]uint64{}
	}
	s.files.aliases[inodeID{dev, ino}] = as
}

// Outside sets the inode whose link count shows 2 whatever it holds: the
// workspace's parent, where dal writes bundles beside the workspace
// (--out ../run1), so that its link count, which counts its
// subdirectories, is the same in the recording and the replay.
func (s *Supervisor) Outside(dev, ino uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files.outside = inodeID{dev, ino}
}
