// Command gen builds dal's vDSO (c/vdso.c, c/vdso.lds) with the machine's gcc
// into vdso_amd64.so, and records the compiler's version beside it in
// vdso_amd64.gcc: `go generate ./internal/sysvirt/vdso`. The blob is
// committed, so dal builds without a C compiler.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Flags build a freestanding shared object without relocations, like the
// kernel's own vDSO (arch/x86/entry/vdso/Makefile).
var Flags = []string{
	"-std=gnu11", "-O2", "-Wall", "-Werror", "-fPIC", "-ffreestanding", "-fno-builtin",
	"-fno-stack-protector", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
	"-fno-tree-loop-distribute-patterns", "-fcf-protection=none", "-fno-ident",
	"-nostdlib", "-shared",
	"-Wl,-T,c/vdso.lds", "-Wl,--hash-style=both", "-Wl,-soname=linux-vdso.so.1",
	"-Wl,--build-id=none", "-Wl,-Bsymbolic", "-Wl,--no-undefined", "-Wl,-z,noexecstack",
	"-Wl,-z,max-page-size=4096",
}

func main() {
	out := flag.String("out", ".", "the directory to write vdso_amd64.so and vdso_amd64.gcc to")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	so := filepath.Join(out, "vdso_amd64.so")
	args := append(append([]string{}, Flags...), "-o", so, "c/vdso.c")
	cmd := exec.Command("gcc", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gcc: %v", err)
	}
	// The symbol and string tables are not loaded; strip them so the blob
	// holds only what the image needs.
	if out, err := exec.Command("strip", "--strip-all", "-R", ".comment", so).CombinedOutput(); err != nil {
		return fmt.Errorf("strip: %v: %s", err, out)
	}
	v, err := exec.Command("gcc", "--version").Output()
	if err != nil {
		return fmt.Errorf("gcc --version: %v", err)
	}
	first, _, _ := bytes.Cut(v, []byte("\n"))
	return os.WriteFile(filepath.Join(out, "vdso_amd64.gcc"), append(first, '\n'), 0o644)
}
