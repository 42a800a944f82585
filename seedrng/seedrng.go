// Package seedrng derives the named, seeded byte streams every dal consumer
// of randomness draws from.
//
// A session has one 64-bit seed. Each consumer names its stream with a label,
// "<process stream>/<source>" by convention ("0/python.random",
// "0.1/os.urandom", "0/node.Math.random"). The bytes of stream (seed, label)
// are fixed by this specification, which the Go package, the Python shim and
// the Node shim implement identically (vectors in testdata/seedrng.json):
//
//	block(i) = SHAKE256("dal.seedrng.v1" || 0x00 || u64be(seed) || u64be(i) || utf8(label), 4096 bytes)
//	stream   = block(0) || block(1) || block(2) || ...
//
// SHAKE-256 is a PRF keyed by its input; counter mode over 4 KiB blocks lets
// every language produce bytes in bulk with one library call per block
// (hashlib.shake_256, crypto.createHash("shake256"), crypto/sha3). Derived
// values read the stream in order:
//
//	Uint64  = next 8 bytes, big-endian
//	Float64 = Uint64 >> 11, times 2^-53 (uniform in [0, 1), 53 bits)
//
// The package is not for cryptographic keys that must stay secret: anyone
// who knows the seed knows every byte.
package seedrng

import (
	"crypto/sha3"
	"encoding/binary"
	"fmt"
	"strconv"
)

// BlockSize is the number of bytes one SHAKE-256 invocation contributes.
const BlockSize = 4096

const domain = "dal.seedrng.v1\x00"

// Block returns block i of stream (seed, label).
func Block(seed uint64, label string, i uint64) []byte {
	in := make([]byte, 0, len(domain)+16+len(label))
	in = append(in, domain...)
	in = binary.BigEndian.AppendUint64(in, seed)
	in = binary.BigEndian.AppendUint64(in, i)
	in = append(in, label...)
	return sha3.SumSHAKE256(in, BlockSize)
}

// Stream is a reader over the bytes of one (seed, label) stream. It is not
// safe for concurrent use.
type Stream struct {
	seed  uint64
	label string
	next  uint64 // index of the next block to compute
	buf   []byte // unread bytes of the current block
}

// Derive returns the stream (seed, label), positioned at its first byte.
func Derive(seed uint64, label string) *Stream {
	return &Stream{seed: seed, label: label}
}

// Label returns the stream's label.
func (s *Stream) Label() string { return s.label }

// Read fills p with the next len(p) bytes of the stream. It never fails.
func (s *Stream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(s.buf) == 0 {
			s.buf = Block(s.seed, s.label, s.next)
			s.next++
		}
		c := copy(p[n:], s.buf)
		s.buf = s.buf[c:]
		n += c
	}
	return n, nil
}

// Bytes returns the next n bytes of the stream.
func (s *Stream) Bytes(n int) []byte {
	p := make([]byte, n)
	s.Read(p)
	return p
}

// Uint64 returns the next 8 bytes as a big-endian integer.
func (s *Stream) Uint64() uint64 {
	var b [8]byte
	s.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (s *Stream) Float64() float64 {
	return float64(s.Uint64()>>11) * (1.0 / (1 << 53))
}

// Int63 implements math/rand.Source.
func (s *Stream) Int63() int64 { return int64(s.Uint64() >> 1) }

// Seed implements math/rand.Source: it repositions s at the start of stream
// (uint64(seed), label).
func (s *Stream) Seed(seed int64) { *s = Stream{seed: uint64(seed), label: s.label} }

// ParseSeed parses a session seed: a decimal or 0x-prefixed hexadecimal
// integer in [0, 2^64).
func ParseSeed(text string) (uint64, error) {
	v, err := strconv.ParseUint(text, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("seed %q is not an integer in [0, 2^64): use a decimal like 42 or hex like 0x2a", text)
	}
	return v, nil
}
