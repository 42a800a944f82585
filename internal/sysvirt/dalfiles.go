package sysvirt

import (
	"time"

	"golang.org/x/sys/unix"
)

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
	if f.barrier == 0 {
		f.barrier = stampBarrier()
	}
	f.dalUntil = f.barrier - 1
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

// stampBarrier returns a time B such that every inode time the kernel gave
// out before the call is before B and every one it gives out after is at
// or after B: the line between what dal wrote and what the agent writes.
// Neither clock draws it. The coarse clock lags what the kernel stamps
// once Linux 6.13's multigrain timestamps hand out fine-grained times, and
// the precise clock runs ahead of a coarse stamp made later in the same
// tick: a write of the agent's then looked like dal's in one run and not
// the next (a child's clock moved, and mktemp's name with it). So it asks
// the file system: it changes a memfd's inode and reads the time it got,
// t, then changes it again until the time given out is later than t — at
// once with multigrain timestamps (a looked-at inode gets a fine-grained
// time, and no later time is earlier), within a tick without them — and
// returns t+1. It falls back on the coarse clock if memfd is refused.
func stampBarrier() int64 {
	fd, err := unix.MemfdCreate("dal-stamp", unix.MFD_CLOEXEC)
	if err != nil {
		return StartNow()
	}
	defer unix.Close(fd)
	touch := func() (int64, bool) {
		var st unix.Stat_t
		if unix.Fchmod(fd, 0o600) != nil || unix.Fstat(fd, &st) != nil {
			return 0, false
		}
		return st.Ctim.Nano(), true
	}
	t, ok := touch()
	if !ok {
		return StartNow()
	}
	// A tick is at most 10 ms (HZ=100); a second is far past any.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		next, ok := touch()
		if !ok {
			break
		}
		if next > t {
			return t + 1
		}
		time.Sleep(200 * time.Microsecond)
	}
	return StartNow()
}
