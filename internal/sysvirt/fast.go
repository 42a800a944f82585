package sysvirt

import (
	"encoding/binary"

	"github.com/dal-runtime/dal/internal/sysvirt/vdso"
	"golang.org/x/sys/unix"
)

// The fast path (strict mode): every new image gets dal's vDSO (package
// vdso) in place of the kernel's, with data pages that hold its clock —
// off = base + reads×quantum for the reads the supervisor served, and the
// reads the vDSO served, which it counts itself — and two buffers of its
// getrandom stream. The pages are private memory of the process: its
// threads share them, a fork copies them and the supervisor resets the
// child's, an exec gets new ones. The supervisor reads and writes them
// with process_vm_readv and process_vm_writev.

// fast reports whether new images get dal's vDSO.
func (s *Supervisor) fast() bool {
	return s.cfg.Clock && s.cfg.Random && !s.cfg.NoVDSO && len(vdsoImage) > 0
}

// pageHeader is the start of p's data pages for a new image or a new
// process: its clock where p's reads leave it, empty buffers.
func (s *Supervisor) pageHeader(p *proc) []byte {
	return vdso.Header(p.base+p.reads*s.cfg.QuantumNS, s.cfg.QuantumNS, s.cfg.EpochNS, s.cfg.MonoNS)
}

// pageWord reads the 8-byte word at offset off of p's data pages through
// task tid. The vDSO may be changing it: two equal reads in a row are a
// value it held.
func pageWord(p *proc, tid int, off uint64) (uint64, bool) {
	var a, b [8]byte
	if ReadMem(tid, p.page+off, a[:]) != nil {
		return 0, false
	}
	for range 100 {
		if ReadMem(tid, p.page+off, b[:]) != nil {
			return 0, false
		}
		if a == b {
			return binary.LittleEndian.Uint64(a[:]), true
		}
		a = b
	}
	return 0, false
}

// pageReads is how many clock reads p's vDSO served in its current image.
// Callers hold mu.
func (s *Supervisor) pageReads(p *proc, tid int) int64 {
	if p.page == 0 {
		return 0
	}
	var v uint64
	ok := false
	if p.threads == 1 {
		// Its one thread is held in the system call being served: the
		// counter cannot be changing.
		var b [8]byte
		if ok = ReadMem(tid, p.page+vdso.OffReads, b[:]) == nil; ok {
			v = binary.LittleEndian.Uint64(b[:])
		}
	} else {
		v, ok = pageWord(p, tid, vdso.OffReads)
	}
	if !ok {
		return int64(p.seen)
	}
	s.countPage(p, v)
	return int64(v)
}

// countPage counts the vDSO's reads up to v as served. Callers hold mu.
func (s *Supervisor) countPage(p *proc, v uint64) {
	if v > p.seen {
		add(&s.counts.Served, Clock, int64(v-p.seen))
		p.seen = v
	}
}

// syncPage writes p's off (base + the reads the supervisor served) into its
// data pages through task tid, under the pages' sequence count so a
// concurrent read in the vDSO sees the old value or the new, whole: one
// process_vm_writev writes the count odd, then off, then the count even.
// Callers hold mu.
func (s *Supervisor) syncPage(p *proc, tid int) {
	if p.page == 0 {
		return
	}
	odd, even := [1]byte{p.seq + 1}, [1]byte{p.seq + 2}
	p.seq += 2
	var off [8]byte
	binary.LittleEndian.PutUint64(off[:], uint64(p.base+p.reads*s.cfg.QuantumNS))
	local := []unix.Iovec{{Base: &odd[0]}, {Base: &off[0]}, {Base: &even[0]}}
	local[0].SetLen(1)
	local[1].SetLen(8)
	local[2].SetLen(1)
	remote := []unix.RemoteIovec{
		{Base: uintptr(p.page + vdso.OffSeq), Len: 1},
		{Base: uintptr(p.page + vdso.OffOff), Len: 8},
		{Base: uintptr(p.page + vdso.OffSeq), Len: 1},
	}
	unix.ProcessVMWritev(tid, local, remote, 0)
}

// setBase moves p's base to v. Callers hold mu.
func (s *Supervisor) setBase(p *proc, tid int, v int64) {
	p.base = v
	s.syncPage(p, tid)
}

// harvest counts the clock reads p's vDSO served so far (at an exec, a
// thread's exit), through task tid. Callers hold mu.
func (s *Supervisor) harvest(p *proc, tid int) {
	if p.page != 0 {
		s.pageReads(p, tid)
	}
}

// newImage gives p's image, which replaces the one whose reads were last
// harvested, fresh data pages: it maps dal's vDSO into task pid, stopped at
// its exec, and returns the vDSO's address for AT_SYSINFO_EHDR.
func (s *Supervisor) newImage(pid int, kernelEhdr uint64, in *injected) (uint64, error) {
	s.mu.Lock()
	p := s.lookup(pid)
	if p == nil {
		s.mu.Unlock()
		return 0, errGone
	}
	// The old image's reads join the ones the supervisor served.
	p.reads += int64(p.seen)
	p.seen, p.page, p.seq = 0, 0, 0
	header := s.pageHeader(p)
	s.mu.Unlock()
	page, calls, err := mapVDSO(pid, kernelEhdr, header, in)
	s.mu.Lock()
	for _, nr := range calls {
		add(&s.counts.Injected, callName(nr), 1)
	}
	if err == nil {
		p.page = page
	}
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return page + vdso.DataSize, nil
}

// forked gives child c of p, which copied p's pages at its fork, pages of
// its own: its clock at its base, no reads, empty buffers. A child that
// shares p's memory (vfork) leaves them alone: until it execs, its vDSO
// reads count in p's. Callers hold mu; c has not run yet.
func (s *Supervisor) forked(p, c *proc, shared bool) {
	if p.page == 0 || shared {
		return
	}
	c.page = p.page
	if writeMem(c.tgid, c.page, s.pageHeader(c)) != nil {
		c.page = 0
	}
}

// sharesMemory reports whether tasks a and b share their address space
// (kcmp KCMP_VM); vfork is the guess when kcmp is not there.
func sharesMemory(a, b int, vfork bool) bool {
	const kcmpVM = 1
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpVM, 0, 0, 0)
	if errno != 0 {
		return vfork
	}
	return r == 0
}

// fromVDSO reports whether n was made by dal's vDSO in p: its instruction
// pointer lies in the image. A program's own calls (glibc 2.36 makes
// getrandom's) leave the pages alone and cost what they did without them.
func (s *Supervisor) fromVDSO(p *proc, n *Notif) bool {
	text := p.page + vdso.DataSize
	return p.page != 0 && n.IP >= text && n.IP <= text+uint64(len(vdsoImage))
}

// refill gives p's vDSO getrandom a full buffer when its current one has
// run out (the call being served is then the vDSO's): the other buffer gets
// the stream's next bytes and becomes the current one. Callers hold mu.
func (s *Supervisor) refill(p *proc, tid int) {
	if p.page == 0 {
		return
	}
	var act [1]byte
	if ReadMem(tid, p.page+vdso.OffRndActive, act[:]) != nil {
		return
	}
	a := uint64(act[0] & 1)
	pos, ok := pageWord(p, tid, vdso.OffRndPos0+a*(vdso.OffRndPos1-vdso.OffRndPos0))
	if !ok || pos <= vdso.RndSize {
		return
	}
	b := 1 - a
	if writeMem(tid, p.page+vdso.OffRnd0+b*(vdso.OffRnd1-vdso.OffRnd0), s.rng(p).Bytes(vdso.RndSize)) != nil {
		return
	}
	var zero [8]byte
	if writeMem(tid, p.page+vdso.OffRndPos0+b*(vdso.OffRndPos1-vdso.OffRndPos0), zero[:]) != nil {
		return
	}
	writeMem(tid, p.page+vdso.OffRndActive, []byte{byte(b)})
}
