package sandbox

import (
	"os"
	"strings"
	"testing"
)

// TestVirtualProcFilesKeepTheHostsLayout: the virtual /proc/stat and
// /proc/meminfo made from this host's have its lines, in its order, with
// as many fields each; only the values change.
func TestVirtualProcFilesKeepTheHostsLayout(t *testing.T) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	// Each line: its first field and how many follow.
	shape := func(s string, keep func(string) bool) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			f := strings.Fields(l)
			if keep(f[0]) {
				out = append(out, f[0]+" "+strings.Repeat("x", len(f)-1))
			}
		}
		return out
	}
	known := func(k string) bool {
		return strings.HasPrefix(k, "cpu") || k == "intr" || k == "ctxt" || k == "btime" ||
			k == "processes" || k == "procs_running" || k == "procs_blocked" || k == "softirq"
	}
	all := func(string) bool { return true }
	for _, c := range []struct {
		name       string
		host, virt string
		keep       func(string) bool
	}{
		{"/proc/stat", string(stat), virtualStat(stat, strictLayer.EpochNS, strictLayer.MonoNS), known},
		{"/proc/meminfo", string(mem), virtualMeminfo(mem), all},
	} {
		h, v := shape(c.host, c.keep), shape(c.virt, all)
		if strings.Join(h, "\n") != strings.Join(v, "\n") {
			t.Errorf("%s: the host's lines\n%s\nthe virtual machine's\n%s", c.name, strings.Join(h, "\n"), strings.Join(v, "\n"))
		}
	}
}
