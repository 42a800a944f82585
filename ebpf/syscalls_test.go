package ebpf

import "testing"

func TestSyscallTables(t *testing.T) {
	tests := []struct {
		arch       string
		nr         uint32
		name       string
		atLeast    int
		noSyscalls []string // names that must not be in this table
	}{
		{"amd64", 0, "read", 370, nil},
		{"amd64", 257, "openat", 370, nil},
		{"amd64", 59, "execve", 370, nil},
		{"arm64", 63, "read", 300, []string{"open", "fork", "arch_specific_syscall"}},
		{"arm64", 56, "openat", 300, nil},
		{"arm64", 221, "execve", 300, nil},
	}
	for _, tc := range tests {
		names := syscallTable(syscallNames[tc.arch])
		if got := names.name(tc.nr); got != tc.name {
			t.Errorf("%s: syscall %d is %q, want %q", tc.arch, tc.nr, got, tc.name)
		}
		n := 0
		seen := map[string]bool{}
		for _, name := range names {
			if name == "" {
				continue
			}
			n++
			if seen[name] {
				t.Errorf("%s: %q appears twice", tc.arch, name)
			}
			seen[name] = true
		}
		if n < tc.atLeast {
			t.Errorf("%s: %d syscalls, want at least %d", tc.arch, n, tc.atLeast)
		}
		if len(names) >= nrCounted-1 {
			t.Errorf("%s: %d numbers do not fit the kernel's %d counting slots", tc.arch, len(names), nrCounted-1)
		}
		for _, name := range tc.noSyscalls {
			if seen[name] {
				t.Errorf("%s: has %q", tc.arch, name)
			}
		}
	}
	if got := syscallTable(syscallNames["amd64"]).name(nrCounted - 1); got != "syscall_other" {
		t.Errorf("the overflow slot is named %q", got)
	}
	if got := syscallTable(syscallNames["amd64"]).name(999); got != "syscall_999" {
		t.Errorf("an unknown number is named %q", got)
	}
}

// Every categorized or inspected name must be a syscall on some
// architecture: a typo would silently never match.
func TestCategoryAndActionNamesExist(t *testing.T) {
	known := map[string]bool{}
	for _, names := range syscallNames {
		for _, n := range names {
			known[n] = true
		}
	}
	for name := range categories {
		if !known[name] {
			t.Errorf("category table names %q, which no architecture has", name)
		}
	}
	for name := range actions {
		if !known[name] {
			t.Errorf("action table names %q, which no architecture has", name)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		acts := syscallTable(syscallNames[arch]).actions()
		has := map[uint32]int{}
		for _, a := range acts {
			has[a]++
		}
		for _, a := range []uint32{actConnect, actSendto, actOpenat, actOpenat2, actExec} {
			if has[a] == 0 {
				t.Errorf("%s: no syscall has action %d", arch, a)
			}
		}
	}
}

func TestCategoryOf(t *testing.T) {
	tests := map[string]Category{
		"clock_gettime": Clock,
		"getrandom":     Random,
		"connect":       Network,
		"openat":        Filesystem,
		"newfstatat":    Filesystem,
		"clone3":        Process,
		"execve":        Process,
		"read":          "",
		"mmap":          "",
	}
	for name, want := range tests {
		if got := CategoryOf(name); got != want {
			t.Errorf("CategoryOf(%q) = %q, want %q", name, got, want)
		}
	}
}
