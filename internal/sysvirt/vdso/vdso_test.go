package vdso

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageIsWhatLoadersExpect: glibc (dynamic and static), musl and the Go
// runtime find their entry points in the committed image, each versioned
// LINUX_2.6, in one loadable segment linked at 0 with a dynamic section,
// DT_HASH (musl reads no other) and no relocations.
func TestImageIsWhatLoadersExpect(t *testing.T) {
	f, err := elf.NewFile(bytes.NewReader(Image))
	if err != nil {
		t.Fatal(err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_DYN {
		t.Fatalf("image is %v %v %v, want a 64-bit x86-64 shared object", f.Class, f.Machine, f.Type)
	}
	var loads, dynamic int
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			loads++
			if p.Off != 0 || p.Vaddr != 0 || p.Filesz != p.Memsz || p.Flags != elf.PF_R|elf.PF_X {
				t.Errorf("loadable segment at offset %#x, address %#x, %d of %d bytes in memory, flags %v: want one from the header, at 0, all in the file, r-x", p.Off, p.Vaddr, p.Filesz, p.Memsz, p.Flags)
			}
			if p.Filesz > uint64(len(Image)) {
				t.Errorf("loadable segment of %d bytes, image of %d", p.Filesz, len(Image))
			}
		case elf.PT_DYNAMIC:
			dynamic++
		}
	}
	if loads != 1 || dynamic != 1 {
		t.Errorf("%d loadable segments and %d dynamic ones, want one of each", loads, dynamic)
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_RELA || s.Type == elf.SHT_REL {
			t.Errorf("section %s holds relocations: nothing relocates a vDSO", s.Name)
		}
	}
	for _, tag := range []elf.DynTag{elf.DT_HASH, elf.DT_GNU_HASH, elf.DT_SYMTAB, elf.DT_STRTAB, elf.DT_VERSYM, elf.DT_VERDEF} {
		if v, err := f.DynValue(tag); err != nil || len(v) != 1 {
			t.Errorf("dynamic section: %v missing (%v)", tag, err)
		}
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]elf.Symbol{}
	for _, s := range syms {
		have[s.Name] = s
	}
	for _, name := range []string{
		"__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time", "__vdso_clock_getres",
		"__vdso_getcpu", "__vdso_getrandom", "clock_gettime", "gettimeofday", "time", "clock_getres", "getcpu",
	} {
		s, ok := have[name]
		switch {
		case !ok:
			t.Errorf("%s is not exported", name)
		case elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF || s.Value == 0:
			t.Errorf("%s: type %v, section %v, value %#x: want a defined function", name, elf.ST_TYPE(s.Info), s.Section, s.Value)
		case s.Version != "LINUX_2.6":
			t.Errorf("%s has version %q, want LINUX_2.6 (the Go runtime and glibc look for it)", name, s.Version)
		}
	}
	if len(Image) > 4096 {
		t.Errorf("image of %d bytes: more than the page the supervisor maps (inject_amd64.go rounds up; check the layout)", len(Image))
	}
}

// TestImageRegenerates: gen with this machine's gcc gives the committed
// bytes when it is the compiler that built them (vdso_amd64.gcc); another
// gcc may lay the code out differently, and the test above checks what
// loaders need.
func TestImageRegenerates(t *testing.T) {
	want, err := os.ReadFile("vdso_amd64.gcc")
	if err != nil {
		t.Fatal(err)
	}
	v, err := exec.Command("gcc", "--version").Output()
	if err != nil {
		t.Fatalf("gcc --version: %v", err)
	}
	if first, _, _ := strings.Cut(string(v), "\n"); first+"\n" != string(want) {
		t.Logf("gcc is %q, the image was built by %q: not comparing bytes", first, strings.TrimSpace(string(want)))
		return
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./gen", "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "vdso_amd64.so"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Image) {
		t.Errorf("regenerated image (%d bytes) differs from the committed one (%d bytes): run go generate ./internal/sysvirt/vdso and commit", len(got), len(Image))
	}
}
