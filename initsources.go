// Package dal holds what only the module's root can: the sources of the
// sandbox's init (cmd/dal-sandbox-init and the packages it links), embedded
// in every binary that starts or is that init, so that dal-exec can tell a
// dal-sandbox-init of its own build from one of another (see
// internal/sandbox's init.go). It is not an API.
package dal

import (
	"embed"
	"hash/crc32"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/dal-runtime/dal/internal/embedfs"
)

// initSources are the files the init is built from: its main package, the
// module's packages it links (initsources_test.go checks the list against
// go list -deps) and go.mod, which pins the modules it links. Test files are
// embedded with the rest (a glob cannot leave them out) but not summed.
//
//go:embed go.mod initsources.go buildsources.go
//go:embed cmd/dal-sandbox-init/*.go
//go:embed internal/sandbox/*.go
//go:embed internal/sysvirt/*.go
//go:embed internal/sysvirt/vdso/*.go internal/sysvirt/vdso/*.so
//go:embed internal/safefs/*.go internal/atomicfile/*.go internal/digest/*.go internal/termsafe/*.go
//go:embed internal/embedfs/*.go internal/format/fsdiff/*.go internal/seccompbpf/*.go
//go:embed seedrng/*.go
var initSources embed.FS

// InitSum is the checksum of the init's sources: CRC-32 over the Go
// toolchain's version, then each file's path, length and content hash in
// path order, with the total length. The content hashes are the ones the
// compiler stores beside each embedded file (package embedfs), so the sum
// reads a few kilobytes, not the 400 kB of sources (which took 0.3-0.4 ms
// at every start of the init and of dal-exec). It tells builds apart, not
// adversaries: a dal-sandbox-init is trusted for its owner and mode, not for
// its sum. Later calls return the same string.
var InitSum = sync.OnceValue(initSum)

func initSum() string { return sumOf(&initSources) }

// sumOf is the checksum of the files of fsys but their tests (see InitSum).
func sumOf(fsys *embed.FS) string {
	b := make([]byte, 0, 16<<10)
	put := func(s string) []byte { return append(append(b, s...), 0) }
	b = put(runtime.Version())
	total := 0
	for _, f := range embedfs.Files(fsys) {
		if strings.HasSuffix(f.Name, "/") || strings.HasSuffix(f.Name, "_test.go") {
			continue
		}
		b = put(f.Name)
		b = put(strconv.Itoa(len(f.Data)))
		b = append(b, f.Hash[:]...)
		total += len(f.Data)
	}
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE(b)), 16) + "-" + strconv.Itoa(total)
}
