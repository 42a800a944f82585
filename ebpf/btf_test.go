package ebpf

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestKernelLayoutMatchesCilium checks the small BTF reader against
// cilium/ebpf's full decoder on the running kernel.
func TestKernelLayoutMatchesCilium(t *testing.T) {
	raw, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Fatalf("this test needs the kernel's BTF: %v", err)
	}
	got, err := layoutFromBTF(raw, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	want := kernelLayout{
		TaskTgid:     ciliumOffset(t, spec, "task_struct", "tgid"),
		BprmFilename: ciliumOffset(t, spec, "linux_binprm", "filename"),
	}
	for i, reg := range syscallArgRegs[runtime.GOARCH] {
		want.RegsArgs[i] = ciliumOffset(t, spec, "pt_regs", reg)
		if reg == "regs" {
			want.RegsArgs[i] += uint32(8 * i)
		}
	}
	if got != want {
		t.Errorf("layout %+v, cilium/ebpf says %+v", got, want)
	}
}

func ciliumOffset(t *testing.T, spec *btf.Spec, structName, member string) uint32 {
	t.Helper()
	var s *btf.Struct
	if err := spec.TypeByName(structName, &s); err != nil {
		t.Fatal(err)
	}
	off, ok := findCilium(s.Members, member)
	if !ok {
		t.Fatalf("cilium/ebpf finds no %s.%s", structName, member)
	}
	return uint32(off.Bytes())
}

func findCilium(members []btf.Member, name string) (btf.Bits, bool) {
	for _, m := range members {
		if m.Name == name {
			return m.Offset, true
		}
		if m.Name != "" {
			continue
		}
		var inner []btf.Member
		switch typ := btf.UnderlyingType(m.Type).(type) {
		case *btf.Struct:
			inner = typ.Members
		case *btf.Union:
			inner = typ.Members
		}
		if off, ok := findCilium(inner, name); ok {
			return m.Offset + off, true
		}
	}
	return 0, false
}

func TestLayoutFromBadBTF(t *testing.T) {
	tests := map[string][]byte{
		"empty":     nil,
		"no magic":  make([]byte, 64),
		"truncated": {0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	}
	for name, raw := range tests {
		if _, err := layoutFromBTF(raw, "amd64"); !errors.Is(err, errBTF) {
			t.Errorf("%s: %v, want errBTF", name, err)
		}
	}
}

func FuzzLayoutFromBTF(f *testing.F) {
	f.Add([]byte{0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 12, 0, 0, 0, 4, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 4, 8, 0, 0, 0, 0, 'p', 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = layoutFromBTF(raw, "amd64") // must not panic
	})
}
