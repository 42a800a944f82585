package sysvirt

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fileAt is a statx answer for inode ino made at real time ns (birth,
// change and modification time).
func fileAt(ino uint64, ns int64) unix.Statx_t {
	ts := unix.StatxTimestamp{Sec: ns / 1e9, Nsec: uint32(ns % 1e9)}
	return unix.Statx_t{Mask: unix.STATX_BASIC_STATS | unix.STATX_BTIME, Mode: unix.S_IFREG | 0o644, Ino: ino,
		Btime: ts, Ctime: ts, Mtime: ts, Atime: ts}
}

// testStart is the runs' real start: an hour ago, so that the values
// after it are not in the future.
var testStart = time.Now().UnixNano() - 3600e9

func newTestSupervisor() *Supervisor {
	s := New(Config{Clock: true, EpochNS: 1767225600e9, QuantumNS: 1000, StartNS: testStart}, -1)
	s.files.agent = testStart
	return s
}

// seeFile rewrites f as p sees it and returns its modification time and inode
// number.
func seeFile(s *Supervisor, p *proc, f unix.Statx_t) (int64, uint64) {
	s.rewrite(p, p.tgid, &f)
	return f.Mtime.Sec*1e9 + int64(f.Mtime.Nsec), f.Ino
}

// TestFileTimesIgnoreLookOrder: what a process sees between two clock reads
// gets the same times whatever order its threads look in, and the same set
// of inode numbers (which thread's file gets which rank is the
// scheduler's), even when one of the files was given a later time by
// another process first (the look moves the process's clock).
func TestFileTimesIgnoreLookOrder(t *testing.T) {
	files := []unix.Statx_t{fileAt(11, testStart+1e6), fileAt(12, testStart+2e6), fileAt(13, testStart+3e6)}
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	type seen struct {
		mtime int64
		ino   uint64
	}
	var first map[int]seen
	var firstBase int64
	for _, order := range orders {
		s := newTestSupervisor()
		other := s.newProc(2, "0.1")
		other.reads = 50 // its clock is ahead
		seeFile(s, other, files[2])
		p := s.newProc(3, "0.2")
		p.threads = 2
		got := map[int]seen{}
		for _, i := range order {
			m, ino := seeFile(s, p, files[i])
			got[i] = seen{m, ino}
		}
		if first == nil {
			first, firstBase = got, p.base
			continue
		}
		numbers := map[uint64]bool{}
		for i := range files {
			if got[i].mtime != first[i].mtime {
				t.Errorf("order %v: file %d shows %d, order %v showed %d", order, i, got[i].mtime, orders[0], first[i].mtime)
			}
			numbers[got[i].ino] = true
		}
		for i := range files {
			if !numbers[first[i].ino] {
				t.Errorf("order %v: numbers %v, order %v gave %v", order, got, orders[0], first)
			}
		}
		if p.base != firstBase {
			t.Errorf("order %v: the clock moved to %d, order %v to %d", order, p.base, orders[0], firstBase)
		}
	}
	if first[0].mtime <= first[2].mtime {
		t.Errorf("a file first seen after another process's look shows %d, not after its %d", first[0].mtime, first[2].mtime)
	}
}

// TestFileTimesLaterInstantIsNewer: a value a process sees after reading the
// clock is newer than one it saw before, and a value seen again keeps its
// time.
func TestFileTimesLaterInstantIsNewer(t *testing.T) {
	s := newTestSupervisor()
	p := s.newProc(2, "0")
	before, _ := seeFile(s, p, fileAt(11, testStart+1e6))
	p.reads++ // a clock read
	after, _ := seeFile(s, p, fileAt(11, testStart+2e6))
	if after <= before {
		t.Errorf("the value seen after a clock read shows %d, not after %d", after, before)
	}
	if again, _ := seeFile(s, p, fileAt(11, testStart+1e6)); again != before {
		t.Errorf("the first value seen again shows %d, was %d", again, before)
	}
}

// TestInodeNumbersIgnoreOtherProcesses: the numbers of the inodes one
// process first sees do not depend on what another process looked at
// before it, and differ from each other.
func TestInodeNumbersIgnoreOtherProcesses(t *testing.T) {
	numbers := func(extra bool) []uint64 {
		s := newTestSupervisor()
		if extra {
			q := s.newProc(2, "0.1")
			seeFile(s, q, fileAt(99, testStart+5e5))
		}
		p := s.newProc(3, "0.2")
		p.reads = 10 // later than the other process
		var out []uint64
		for _, ino := range []uint64{11, 12, 13} {
			_, n := seeFile(s, p, fileAt(ino, testStart+1e6))
			out = append(out, n)
		}
		return out
	}
	a, b := numbers(false), numbers(true)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("inode %d is %d, and %d when another process looked at a file first", i, a[i], b[i])
		}
		if a[i] <= inodeBase || (i > 0 && a[i] == a[i-1]) {
			t.Errorf("inode numbers %v are not the run's, or not distinct", a)
		}
	}
}

// TestFileTimesKeepOldFilesAndDalsOwn: a file from before the run keeps its
// time and number; one dal made before the agent started shows the run's
// start and keeps its number.
func TestFileTimesKeepOldFilesAndDalsOwn(t *testing.T) {
	s := newTestSupervisor()
	s.files.agent = testStart + 1e9
	p := s.newProc(2, "0")
	if m, ino := seeFile(s, p, fileAt(11, testStart-5e9)); m != testStart-5e9 || ino != 11 {
		t.Errorf("a file from before the run shows %d, inode %d", m, ino)
	}
	if m, ino := seeFile(s, p, fileAt(12, testStart+5e8)); m != s.cfg.EpochNS || ino != 12 {
		t.Errorf("a file dal made shows %d, inode %d; want the run's start %d and its own number", m, ino, s.cfg.EpochNS)
	}
}

// TestStampBarrierSeparatesWrites: what the file system stamped before the
// barrier is before it, what it stamps after is at or after it — in the
// same tick too, where neither clock draws the line (a precise clock read
// runs ahead of a coarse stamp made after it).
func TestStampBarrierSeparatesWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctime := func(name string) int64 {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ctim.Nano()
	}
	for i := range 200 {
		before := ctime("before")
		b := stampBarrier()
		after := ctime("after")
		if before >= b || after < b {
			t.Fatalf("round %d: stamped %d before and %d after a barrier at %d", i, before, after, b)
		}
	}
}
