package sysvirt

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/dal-runtime/dal/internal/sysvirt/vdso"
	"golang.org/x/sys/unix"
)

// A quiet thread reads its process's clock without moving it: Go's sysmon.
//
// The Go runtime's monitor thread wakes on the real clock (every 20 µs to
// 10 ms) and reads the monotonic clock at each wake-up. Its reads were
// quanta of the process's shared clock, so a program's own time.Now moved
// by how often sysmon had run meanwhile: 12–56 µs over a 100 ms loop, 2 µs
// over a 50 ms sleep, run to run. Its reads see the clock where the
// program's reads left it instead; they are served (virtual values) but
// not counted.
//
// It is the first thread a Go image creates (runtime.main starts sysmon
// before anything else). With dal's vDSO the
// image's data pages name it by its FS base, which the vDSO reads with
// rdfsbase (where the kernel allows it: HWCAP2_FSGSBASE; elsewhere its
// vDSO reads count as before); a clock system call of it is served without
// the quantum.

// quietJoined notes thread child joining p: the first of a Go image is its
// quiet thread. It runs at the parent's clone event or at the child's first
// stop, whichever the tracer sees first; the parent waits at its clone
// event, so no other new thread can come between. Callers hold mu.
func (p *proc) quietJoined(child int) {
	if p.goImage && !p.quietSeen {
		p.quietSeen, p.quiet = true, child
	}
}

// quietStart names thread tid, at its first stop, in its image's data
// pages if it is the quiet thread, before it runs.
func (s *Supervisor) quietStart(tid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.lookup(tid)
	if p == nil || p.quiet != tid || p.page == 0 || !fsgsbase() {
		return
	}
	fs, ok := fsBase(tid)
	if !ok {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], fs)
	if writeMem(tid, p.page+vdso.OffQuiet, b[:]) != nil {
		return
	}
	binary.LittleEndian.PutUint64(b[:], 1)
	writeMem(tid, p.page+vdso.OffNQuiet, b[:])
}

// goBuildInfo is the section every Go executable has, stripped or not.
var goBuildInfo = []byte(".go.buildinfo\x00")

// A program whose clock stands still cannot be preempted: Go's sysmon
// preempts a goroutine that ran 10 ms by the clock, and with its reads
// quiet a goroutine spinning on another's flag (GOMAXPROCS=1) would spin
// forever. When the program has read no clock while its quiet thread kept
// waking for stallLimit of real time, its clock moves by stallStep (Go's
// forcePreemptNS) and the move counts as a clock escape: from there its
// values follow the real clock. A busy loop that reads no clock and
// allocates nothing for longer than a second does the same.
const (
	stallLimit = time.Second
	stallStep  = int64(10 * time.Millisecond)
)

// quietSleep runs at a real sleep of thread tid of p (in a multi-threaded
// process sleeps are real). Callers hold mu.
func (s *Supervisor) quietSleep(p *proc, tid int) {
	if tid != p.quiet {
		return
	}
	v, now := p.reads+s.pageReads(p, tid), time.Now()
	if v != p.stallReads || p.stallSince.IsZero() {
		p.stallReads, p.stallSince = v, now
		return
	}
	if now.Sub(p.stallSince) < stallLimit {
		return
	}
	p.stallSince = now
	s.setBase(p, tid, p.base+stallStep)
	s.escaped(Clock)
	s.counts.note("a Go program ran a second without reading its clock: dal moved the clock 10 ms so its runtime could preempt it (its clock values from there are not reproducible)")
}

// goImage reports whether task pid's executable was built by Go.
func goImage(pid int) bool { return goFile("/proc/" + strconv.Itoa(pid) + "/exe") }

// goFile reports whether the file at path is a Go executable: its ELF
// section names hold .go.buildinfo. The file is the agent's: it is read
// with bounds on every size, never trusted.
func goFile(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var h [64]byte
	if n, _ := unix.Pread(fd, h[:], 0); n != len(h) || string(h[:4]) != "\x7fELF" || h[4] != 2 || h[5] != 1 {
		return false // not a 64-bit little-endian ELF file
	}
	le := binary.LittleEndian
	shoff, shentsize, shnum, shstrndx := le.Uint64(h[40:]), int(le.Uint16(h[58:])), int(le.Uint16(h[60:])), int(le.Uint16(h[62:]))
	if shentsize != 64 || shnum == 0 || shnum > 4096 || shstrndx >= shnum || shoff > 1<<40 {
		return false
	}
	sh := make([]byte, shnum*64)
	if n, _ := unix.Pread(fd, sh, int64(shoff)); n != len(sh) {
		return false
	}
	str := sh[shstrndx*64:]
	off, size := le.Uint64(str[24:]), le.Uint64(str[32:])
	if size == 0 || size > 1<<16 || off > 1<<40 {
		return false
	}
	names := make([]byte, size)
	if n, _ := unix.Pread(fd, names, int64(off)); n != len(names) {
		return false
	}
	for i := range shnum {
		if name := uint64(le.Uint32(sh[i*64:])); name < size && bytes.HasPrefix(names[name:], goBuildInfo) {
			return true
		}
	}
	return false
}
