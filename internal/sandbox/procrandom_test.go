package sandbox

import (
	"regexp"
	"strings"
	"testing"
)

// TestProcRandomIsSeeded: with virtual randomness the kernel's UUIDs in
// /proc come from the seed: each read of uuid is a new UUID (cat, Python,
// several in one shell), the same list in two sandboxes with one seed and
// another with another seed; boot_id is fixed, from the seed, read-only.
func TestProcRandomIsSeeded(t *testing.T) {
	t.Parallel()
	script := `for i in 1 2 3; do cat /proc/sys/kernel/random/uuid; done
python3 -c 'print(open("/proc/sys/kernel/random/uuid").read().strip())'
cat /proc/sys/kernel/random/boot_id /proc/sys/kernel/random/boot_id
echo x > /proc/sys/kernel/random/boot_id 2>/dev/null || echo "boot_id read-only"`
	runSeed := func(seed uint64) []string {
		cfg := newConfig(t, nil)
		cfg.Virtual = strictLayer
		cfg.Virtual.Seed = seed
		r := run(t, cfg, script)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		return strings.Split(strings.TrimSpace(r.stdout), "\n")
	}
	a, b, c := runSeed(1), runSeed(1), runSeed(2)
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if len(a) != 7 || a[6] != "boot_id read-only" {
		t.Fatalf("output %q", a)
	}
	seen := map[string]bool{}
	for _, u := range a[:4] {
		if !uuid.MatchString(u) || seen[u] {
			t.Errorf("uuid reads %q: want four distinct version 4 UUIDs", a[:4])
		}
		seen[u] = true
	}
	if a[4] != a[5] || !uuid.MatchString(a[4]) || seen[a[4]] {
		t.Errorf("boot_id %q then %q: want one UUID, not a uuid read", a[4], a[5])
	}
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("seed 1 twice: %q then %q", a, b)
	}
	for i := range 5 {
		if a[i] == c[i] {
			t.Errorf("seeds 1 and 2 give the same line %d: %q", i, a[i])
		}
	}
}
