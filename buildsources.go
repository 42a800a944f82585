package dal

import (
	"embed"
	"sync"
)

// buildSources are the files dal-exec-full is built from (its packages in
// this module, their embedded files, go.mod and go.sum; the list is
// checked against go list -deps by buildsources_test.go), embedded in
// dal-exec and dal-exec-full. The files other packages embed too cost no
// space twice: the linker keeps one copy of equal contents. Binaries
// that never call BuildSum (dal-sandbox-init) leave them out.
//
//go:embed go.mod go.sum initsources.go buildsources.go
//go:embed bundle/*.go bundle/*.json
//go:embed cmd/dal-exec/*.go cmd/dal-exec-full/*.go cmd/dal-sandbox-init/*.go
//go:embed ebpf/*.go ebpf/*.o
//go:embed internal/atomicfile/*.go internal/boundary/*.go internal/checkpoint/*.go internal/cli/*.go
//go:embed internal/consistency/*.go internal/consistency/consensus/*.go internal/consistency/stats/*.go
//go:embed internal/daemon/*.go internal/dashboard/*.go internal/dashboard/assets internal/digest/*.go internal/embedfs/*.go internal/format/fsdiff/*.go internal/format/runenv/*.go internal/helptext/*.go internal/seccompbpf/*.go internal/iterate/*.go internal/leftover/*.go
//go:embed internal/marks/*.go internal/marks/rundir/*.go internal/match/*.go
//go:embed internal/netcap/*.go internal/netcap/har/*.go internal/netcap/prompts/*.go internal/plural/*.go
//go:embed internal/policy/*.go internal/policy/engine/*.go internal/policy/gate/*.go internal/policy/rego/*.go internal/policy/rego/*.json
//go:embed internal/procnet/*.go internal/record/*.go internal/replay/*.go internal/runner/*.go
//go:embed internal/safefs/*.go internal/sandbox/*.go internal/shim/*.go all:internal/shim/node all:internal/shim/python
//go:embed internal/show/*.go internal/show/assets
//go:embed internal/sysvirt/*.go internal/sysvirt/vdso/*.go internal/sysvirt/vdso/*.so
//go:embed internal/termsafe/*.go internal/trace/*.go internal/usage/*.go internal/version/*.go internal/wire/*.go
//go:embed metrics/*.go seedrng/*.go vclock/*.go
var buildSources embed.FS

// BuildSum is the checksum of buildSources, as [InitSum] is of the init's:
// dal-exec hands it to dal-exec-full, which runs a command only for a
// dal-exec of its own build. Later calls return the same string. A
// function, not a sync.OnceValue set at package initialisation, which
// would keep buildSources in every binary.
func BuildSum() string {
	buildOnce.Do(func() { buildSum = sumOf(&buildSources) })
	return buildSum
}

var (
	buildOnce sync.Once
	buildSum  string
)
