package sysvirt

import (
	"encoding/binary"

	"github.com/dal-runtime/dal/seedrng"
)

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// seedBytes returns the first n bytes of stream (seed, label).
func seedBytes(seed uint64, label string, n int) []byte {
	return seedrng.Derive(seed, label).Bytes(n)
}
