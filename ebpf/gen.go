package ebpf

// The BPF object is compiled once for every little-endian target: it holds
// no syscall numbers and no kernel struct layout (Open sets both), so the
// same bytes serve amd64 and arm64. `make generate` runs these lines; the
// pinned clang-14 and llvm-strip-14 make the committed object byte-identical
// wherever it is rebuilt.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -mcpu=v3 -Wall -Werror" -target bpfel -tags linux boundary bpf/boundary.c
//go:generate go run ./internal/mksysnum -o zsysnum.go
