// Package dal holds what only the module's root can: the sources of the
// sandbox's init (cmd/dal-sandbox-init and the packages it links), embedded
// in every binary that starts or is that init, so that dal-exec can tell a
// dal-sandbox-init of its own build from one of another (see
// internal/sandbox's init.go). It is not an API.
package dal

import (
	"embed"
	"hash/crc32"
	"io"
	"io/fs"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// initSources are the files the init is built from: its main package, the
// module's packages it links (initsources_test.go checks the list against
// go list -deps) and go.mod, which pins the modules it links. Test files are
// embedded with the rest (a glob cannot leave them out) but not summed.
//
//go:embed go.mod initsources.go
//go:embed cmd/dal-sandbox-init/*.go
//go:embed internal/sandbox/*.go
//go:embed internal/sysvirt/*.go
//go:embed internal/sysvirt/vdso/*.go internal/sysvirt/vdso/*.so
//go:embed internal/safefs/*.go internal/atomicfile/*.go internal/digest/*.go internal/termsafe/*.go
//go:embed seedrng/*.go
var initSources embed.FS

// InitSum is the checksum of the init's sources: CRC-32 over the Go
// toolchain's version, then each file's path, length and bytes in path
// order, with the total length. IEEE's polynomial, not Castagnoli's, whose
// tables take longer to make (150 µs) than the sum. It tells builds apart, not adversaries: a
// dal-sandbox-init is trusted for its owner and mode, not for its sum. The
// first call reads the embedded files (about 400 kB, well under a
// millisecond); later calls return the same string.
var InitSum = sync.OnceValue(initSum)

func initSum() string {
	h := crc32.NewIEEE()
	total := int64(0)
	put := func(s string) {
		io.WriteString(h, s)
		h.Write([]byte{0})
	}
	put(runtime.Version())
	buf := make([]byte, 32<<10)
	fs.WalkDir(initSources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := initSources.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		put(p)
		put(strconv.FormatInt(st.Size(), 10))
		n, err := io.CopyBuffer(h, f, buf)
		total += n
		return err
	})
	return strconv.FormatUint(uint64(h.Sum32()), 16) + "-" + strconv.FormatInt(total, 10)
}
