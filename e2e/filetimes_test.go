package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFileTimesAreOnTheVirtualClock records a script that makes files and
// looks at them with ls, stat, Python, Node, C (glibc and raw statx), Go
// without dal's agent package, tar and git, twice in strict mode in fresh
// workspaces: the outputs are byte-identical, the new files' times are on
// the virtual clock, a file that was there before keeps its time, a planted
// symbolic link is seen as a link by a stat that does not follow it, and a
// replay is EXACT (issue 14).
func TestFileTimesAreOnTheVirtualClock(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("testdata/filetimes/script.sh")
	if err != nil {
		t.Fatal(err)
	}
	python := pythonInterpreter(t)
	cstat, gostat := buildStatProbes(t)
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "key")}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	record := func(i int) (result, string) {
		t.Helper()
		ws, out := filepath.Join(dir, "ws"+strconv.Itoa(i)), filepath.Join(dir, "bundle"+strconv.Itoa(i))
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(ws, "old.txt")
		if err := os.WriteFile(f, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
		r := dalIn(t, ws, key, "record", "--mode", "strict", "--seed", "7", "--no-apply", "--out", out, "--", "bash", script, python, cstat, gostat)
		if r.code != 0 {
			t.Fatalf("record: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		return r, out
	}
	first, bundle := record(1)
	again, _ := record(2)
	if again.stdout != first.stdout {
		t.Errorf("two strict recordings differ:\n%s", lineDiff(first.stdout, again.stdout))
	}

	lines, date := map[string][]string{}, int64(0)
	for _, l := range strings.Split(first.stdout, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "date":
			date, _ = strconv.ParseInt(f[1], 10, 64)
		case len(f) >= 4 && (f[0] == "c" || f[0] == "go"):
			lines[strings.Join(f[:2], " ")] = f
		case len(f) >= 4 && (f[0] == "python" || f[0] == "node"):
			lines[strings.Join(f[:3], " ")] = f
		case len(f) == 3:
			lines[strings.Join(f[:2], " ")] = f
		}
	}
	if date < epochSeconds || date > epochSeconds+60 {
		t.Fatalf("date printed %d, not on the virtual clock:\n%s", date, first.stdout)
	}
	field := func(name string, i int) string {
		f := lines[name]
		if len(f) <= i {
			t.Fatalf("no line %q with %d fields in:\n%s", name, i+1, first.stdout)
		}
		return f[i]
	}
	for _, name := range []string{"python stat newdir/a.txt", "python stat newdir/sub"} {
		for i := 5; i <= 7; i++ { // atime, mtime, ctime
			ns, err := strconv.ParseInt(field(name, i), 10, 64)
			if err != nil || ns/1e9 < date || ns/1e9 > date+60 {
				t.Errorf("%s: time %s is not on the virtual clock next to date's %d", name, field(name, i), date)
			}
		}
	}
	if ino, _ := strconv.ParseUint(field("python stat newdir/a.txt", 4), 10, 64); ino <= 1<<32 {
		t.Errorf("a new file's inode number is %d, want one of the run's (above 2^32)", ino)
	}
	for _, name := range []string{"python old", "node old"} {
		if got := strings.TrimSuffix(field(name, 2), "n"); got != strconv.FormatInt(old.UnixNano(), 10) {
			t.Errorf("%s: old.txt's mtime is %s, want its own %d", name, got, old.UnixNano())
		}
	}
	if !strings.Contains(first.stdout, "old.txt 2020-01-01 00:00:00.000000000 +0000\n") {
		t.Errorf("stat shows old.txt's time changed:\n%s", first.stdout)
	}
	// The planted links are seen as links, never as their targets.
	if m, size := field("python lstat planted", 7), field("python lstat planted", 8); m != "lrwxrwxrwx" || size != "11" {
		t.Errorf("lstat of the planted link shows %s of size %s, want the link itself (lrwxrwxrwx, 11)", m, size)
	}
	if !strings.Contains(first.stdout, "node lstat planted true 11n ") {
		t.Errorf("Node's lstat of the planted link does not show the link:\n%s", first.stdout)
	}
	if !strings.Contains(first.stdout, "planted-fifo fifo ") {
		t.Errorf("stat -L of a link to a FIFO does not show the FIFO:\n%s", first.stdout)
	}

	// C and Go show the times and numbers the others show.
	mtime, ino := field("python stat newdir/a.txt", 6), field("python stat newdir/a.txt", 4)
	for _, call := range []string{"c stat", "c lstat", "c fstat", "c fstatat", "c statx", "go stat", "go lstat", "go fstat"} {
		if field(call, 2) != mtime || field(call, 3) != ino {
			t.Errorf("%s shows mtime %s inode %s, Python %s %s", call, field(call, 2), field(call, 3), mtime, ino)
		}
	}

	rep := dalIn(t, recordedIn(t, bundle), key, "replay", bundle)
	if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
		t.Errorf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
	}
}

// buildStatProbes builds testdata/filetimes' C and Go probes into a
// directory of their own.
func buildStatProbes(t *testing.T) (cstat, gostat string) {
	t.Helper()
	dir := t.TempDir()
	cstat, gostat = filepath.Join(dir, "cstat"), filepath.Join(dir, "gostat")
	if out, err := exec.Command("gcc", "-O2", "-o", cstat, "testdata/filetimes/cstat.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	build := exec.Command("go", "build", "-o", gostat, "./testdata/filetimes/gostat")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gostat: %v\n%s", err, out)
	}
	return cstat, gostat
}

// TestStatAnswersForTheCaller plants links whose target depends on who
// follows them (/proc/self/fd/5, /dev/fd/5, /proc/self): the supervisor,
// which stats on the agent's behalf, must not answer for itself. The
// agent sees its own descriptor 5 (old.txt, 4 bytes; the supervisor's is a
// pipe), got from the kernel, and the run says the clock escaped there
// rather than claiming it captured.
func TestStatAnswersForTheCaller(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("testdata/filetimes/statview.sh")
	if err != nil {
		t.Fatal(err)
	}
	ws, out := t.TempDir(), filepath.Join(t.TempDir(), "bundle")
	if err := os.WriteFile(filepath.Join(ws, "old.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "key")}
	r := dalIn(t, ws, key, "record", "--mode", "strict", "--no-apply", "--out", out, "--", "bash", script)
	if r.code != 0 {
		t.Fatalf("record: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"self5 regular file 4\n", "fd5 regular file 4\n", "selfdir directory\n", "new 2026-01-01 00:00:00."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "syscalls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Categories map[string]struct {
			Captured bool `json:"captured"`
		} `json:"categories"`
	}
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	if report.Categories["clock"].Captured {
		t.Errorf("syscalls.json says the clock was captured, though stats through /proc got real times:\n%s", b)
	}
}

// BenchmarkStatUnderTheLayer: a C loop looking at a file it made (stat of
// a relative and of an absolute path, fstatat of a name in a directory
// descriptor, fstat), served by the supervisor
// under `dal-exec record --mode strict`, against the same loop run
// natively; each the best of three runs of 20,000 calls less the best of
// three runs of none, per call.
func BenchmarkStatUnderTheLayer(b *testing.B) {
	dir := b.TempDir()
	loop := filepath.Join(dir, "statloop")
	if out, err := exec.Command("gcc", "-O2", "-o", loop, "testdata/filetimes/statloop.c").CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, out)
	}
	key := []string{"DAL_KEY=" + filepath.Join(dir, "key")}
	timed := func(layer bool, op string, n int) time.Duration {
		argv := []string{loop, op, strconv.Itoa(n)}
		cmd := exec.Command(argv[0], argv[1:]...)
		if layer {
			cmd = exec.Command(bin.exec, append([]string{"record", "--mode", "strict", "--no-apply", "--out", filepath.Join(b.TempDir(), "bundle"), "--"}, argv...)...)
		}
		cmd.Dir, cmd.Env = b.TempDir(), append(os.Environ(), key...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		return d
	}
	const n = 20000
	perCall := func(layer bool, op string) float64 {
		best := func(n int) time.Duration {
			m := time.Duration(1 << 62)
			for range 3 {
				m = min(m, timed(layer, op, n))
			}
			return m
		}
		return float64(max(best(n)-best(0), 0)) / n
	}
	for _, op := range []string{"stat-rel", "stat-abs", "stat-at", "fstat"} {
		b.Run(op, func(b *testing.B) {
			var native, layer float64
			for b.Loop() {
				native += perCall(false, op)
				layer += perCall(true, op)
			}
			b.ReportMetric(native/float64(b.N), "native-ns/call")
			b.ReportMetric(layer/float64(b.N), "layer-ns/call")
			if native > 0 {
				b.ReportMetric(layer/native, "x-native")
			}
		})
	}
}

// The supervisor stats with the agent's permissions, not its own: a file
// in a directory the agent may not search (another user's, mode 0700) is
// EACCES to stat, as without dal; before, the supervisor's capabilities
// answered with its size and times.
func TestStatHasTheCallersPermissions(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/var/cache", "dal-e2e-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secret, dir} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	probe := `stat -c '%s %Y' "$1" 2>&1 || true
python3 -c 'import os, sys
try:
    print(os.stat(sys.argv[1]).st_size)
except OSError as e:
    print(e.strerror)' "$1"
touch mine && stat -c '%Y' mine`
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "probe.sh"), []byte(probe), 0o644)
	key := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "key")}
	r := dalIn(t, ws, key, "record", "--mode", "strict", "--no-apply", "--out", filepath.Join(t.TempDir(), "b"), "--", "bash", "probe.sh", secret)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "7 ") || strings.Count(r.stdout, "Permission denied") != 2 || !strings.HasSuffix(r.stdout, "1767225600\n") {
		t.Errorf("the agent's stats of %s:\n%s\n%s", secret, r.stdout, r.stderr)
	}
}
