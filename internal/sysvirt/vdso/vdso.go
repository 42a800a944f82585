// Package vdso holds dal's vDSO: a small shared object that serves
// clock_gettime, gettimeofday, time and getrandom from a process's stream
// without a system call, in place of the kernel's vDSO. The supervisor
// maps it into every new image of a strict run, with its data pages just
// before it, and points AT_SYSINFO_EHDR at it (see package sysvirt).
//
// The object is built from c/vdso.c and c/vdso.lds by gen (go generate, with
// gcc) and committed, so dal itself needs no C compiler.
package vdso

import (
	_ "embed"
	"encoding/binary"
)

//go:generate go run ./gen

// Image is the shared object, for amd64.
//
//go:embed vdso_amd64.so
var Image []byte

// Data page layout: struct data in c/vdso.c. The data pages come first in
// the mapping, the image right after them.
const (
	Magic    = 0x316f7364766c6164 // "dalvdso1"
	DataSize = 3 * 4096

	OffMagic     = 0
	OffSeq       = 8  // one byte: odd while the supervisor changes Off
	OffOff       = 16 // base + supervisor-served reads × quantum, ns
	OffQuantum   = 24
	OffEpoch     = 32
	OffMono      = 40
	OffRndSize   = 48
	OffRndActive = 56 // one byte: the buffer getrandom draws from
	OffReads     = 64 // clock reads served in the process
	OffNQuiet    = 72 // how many of the quiet FS bases are set
	OffQuiet     = 80 // MaxQuiet FS bases of threads whose reads do not move the clock
	OffRndPos0   = 128
	OffRndPos1   = 192
	OffRnd0      = 4096
	OffRnd1      = 8192

	// MaxQuiet is how many quiet threads the data pages hold.
	MaxQuiet = 6

	// RndSize is the size of each of the two getrandom buffers.
	RndSize = 4096
)

// Header returns the first bytes of a new image's data pages, through
// OffRndPos1+8: both getrandom buffers empty, no reads yet.
func Header(off, quantum, epoch, mono int64) []byte {
	b := make([]byte, OffRndPos1+8)
	le := binary.LittleEndian
	le.PutUint64(b[OffMagic:], Magic)
	le.PutUint64(b[OffOff:], uint64(off))
	le.PutUint64(b[OffQuantum:], uint64(quantum))
	le.PutUint64(b[OffEpoch:], uint64(epoch))
	le.PutUint64(b[OffMono:], uint64(mono))
	le.PutUint64(b[OffRndSize:], RndSize)
	le.PutUint64(b[OffRndPos0:], Empty)
	le.PutUint64(b[OffRndPos1:], Empty)
	return b
}

// Empty is a buffer position past its end: the next getrandom asks the
// supervisor, which refills.
const Empty = RndSize + 1
