package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFileTimesAreOnTheVirtualClock records a script that makes files and
// looks at them with ls, stat, Python, Node, tar and git, twice in strict
// mode in fresh workspaces: the outputs are byte-identical, the new files'
// times are on the virtual clock, a file that was there before keeps its
// time, a planted symbolic link is seen as a link by a stat that does not
// follow it, and a replay is EXACT (issue 14).
func TestFileTimesAreOnTheVirtualClock(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("testdata/filetimes/script.sh")
	if err != nil {
		t.Fatal(err)
	}
	python := pythonInterpreter(t)
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
		r := dalIn(t, ws, key, "record", "--mode", "strict", "--seed", "7", "--no-apply", "--out", out, "--", "bash", script, python)
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

	rep := dalIn(t, "/", key, "replay", bundle)
	if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
		t.Errorf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
	}
}
