package sandbox

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dal-runtime/dal/internal/digest"
	"golang.org/x/sys/unix"
)

// exported records script over files and exports the capture; it returns
// the config, the changes read back and the bundle's fs-diff and fs-pre.
func exported(t *testing.T, files map[string]string, script string) (Config, []Change, string, string) {
	t.Helper()
	cfg := newConfig(t, files)
	if r := run(t, cfg, script); r.code != 0 {
		t.Fatalf("agent failed: exit %d, %s", r.code, r.stderr)
	}
	cs, err := Capture(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bundle := t.TempDir()
	diffDir, preDir := filepath.Join(bundle, "fs-diff"), filepath.Join(bundle, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	read, err := ReadChanges(filepath.Join(diffDir, "changes.json"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, read, diffDir, preDir
}

// hostTree makes a directory outside every workspace holding one file, and
// returns it with a function that fails the test if it changed.
func hostTree(t *testing.T) (string, func()) {
	t.Helper()
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "authorized_keys"), []byte("host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, host)
	return host, func() {
		t.Helper()
		if after := snapshotTree(t, host); after != before {
			t.Errorf("the host tree changed:\nbefore %s\nafter  %s", before, after)
		}
	}
}

// TestApplyRevertPlantedLinks: symlinks in the workspace, as a parent or as
// the changed path itself, pointing out of the workspace or inside it,
// make Apply and Revert refuse before anything is written; nothing they
// point at changes (issue 12, attack 3).
func TestApplyRevertPlantedLinks(t *testing.T) {
	t.Parallel()
	files := map[string]string{"keep/old.txt": "o\n", "mod.txt": "m\n", "inner/x": "x\n", "gone.txt": "g\n"}
	script := "echo new > keep/new.txt && echo more >> mod.txt && rm gone.txt"
	for _, tc := range []struct {
		name    string
		forward bool // Apply (else Revert after Apply)
		plant   func(ws, host string) error
		why     string
	}{
		{"apply: parent links out", true, func(ws, host string) error {
			os.RemoveAll(filepath.Join(ws, "keep"))
			return os.Symlink(host, filepath.Join(ws, "keep"))
		}, "keep: it is a symlink, expected the directory"},
		{"apply: parent links inside", true, func(ws, host string) error {
			os.RemoveAll(filepath.Join(ws, "keep"))
			return os.Symlink("inner", filepath.Join(ws, "keep"))
		}, "keep: it is a symlink, expected the directory"},
		{"apply: the modified file links out", true, func(ws, host string) error {
			os.Remove(filepath.Join(ws, "mod.txt"))
			return os.Symlink(filepath.Join(host, "authorized_keys"), filepath.Join(ws, "mod.txt"))
		}, "mod.txt: it is a symlink, expected a file"},
		{"apply: the created file links out", true, func(ws, host string) error {
			return os.Symlink(filepath.Join(host, "authorized_keys"), filepath.Join(ws, "keep/new.txt"))
		}, "keep/new.txt: it exists and should not"},
		{"revert: parent links out", false, func(ws, host string) error {
			os.RemoveAll(filepath.Join(ws, "keep"))
			return os.Symlink(host, filepath.Join(ws, "keep"))
		}, "keep: it is a symlink, expected the directory"},
		{"revert: the deleted file links out", false, func(ws, host string) error {
			return os.Symlink(filepath.Join(host, "authorized_keys"), filepath.Join(ws, "gone.txt"))
		}, "gone.txt: it exists and should not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host, unchanged := hostTree(t)
			cfg, cs, diffDir, preDir := exported(t, files, script)
			ws := cfg.Workspace
			if !tc.forward {
				if err := Apply(ws, diffDir, cs); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.plant(ws, host); err != nil {
				t.Fatal(err)
			}
			before := snapshotTree(t, ws)
			var err error
			if tc.forward {
				err = Apply(ws, diffDir, cs)
			} else {
				err = Revert(ws, preDir, cs)
			}
			var se *StateError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("got %v, want a state error saying %q", err, tc.why)
			}
			if after := snapshotTree(t, ws); after != before {
				t.Errorf("the refused operation changed the workspace")
			}
			unchanged()
		})
	}
}

// TestRevertCraftedList: a change list that would have Revert restore a
// symlink and then write through it is refused as invalid, and a mirror
// holding a symlink where a file is recorded is not read through.
func TestRevertCraftedList(t *testing.T) {
	t.Parallel()
	host, unchanged := hostTree(t)
	target := host
	link := Change{Path: "a", Op: OpDeleted, Kind: KindSymlink, Mode: 0o777, LinkTarget: target, Hash: digest.Bytes([]byte(target)), Size: int64(len(target))}
	through := Change{Path: "a/authorized_keys", Op: OpDeleted, Kind: KindFile, Mode: 0o644, Hash: digest.Bytes([]byte("evil\n")), Size: 5}
	ws := t.TempDir()
	pre := t.TempDir()
	os.MkdirAll(filepath.Join(pre, "files", "a"), 0o755)
	os.WriteFile(filepath.Join(pre, "files", "a", "authorized_keys"), []byte("evil\n"), 0o644)
	err := Revert(ws, pre, []Change{link, through})
	if err == nil || !strings.Contains(err.Error(), "lies below a, which is a symlink") {
		t.Fatalf("Revert of a list writing through its own symlink: %v", err)
	}
	if err := Validate([]Change{link, through}); err == nil {
		t.Errorf("Validate accepted it")
	}

	// The mirror's copy of a file is a symlink to a host file.
	secret := filepath.Join(host, "authorized_keys")
	pre2 := t.TempDir()
	os.MkdirAll(filepath.Join(pre2, "files"), 0o755)
	os.Symlink(secret, filepath.Join(pre2, "files", "f"))
	f := Change{Path: "f", Op: OpDeleted, Kind: KindFile, Mode: 0o644, Hash: digest.Bytes([]byte("host\n")), Size: 5}
	if err := Revert(ws, pre2, []Change{f}); err == nil || !strings.Contains(err.Error(), "the copy of f is missing") {
		t.Errorf("Revert from a mirror holding a symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "f")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the host file was copied into the workspace: %v", err)
	}
	unchanged()
}

// TestApplyStrips: a setuid-root program and a setgid file the agent made
// are applied without those bits and listed as stripped; what Apply
// creates belongs to the invoking user, not to the capture layer's owner;
// Revert after Apply still works.
func TestApplyStrips(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, map[string]string{"tool": "#!/bin/sh\n", "plain": "p"})
	script := `set -e
printf 'x' > suid && chmod 4755 suid
printf 'y' > sgid && chmod 2750 sgid
chmod 4755 tool
mkdir shared && chmod 2775 shared
`
	if r := run(t, cfg, script); r.code != 0 {
		t.Fatalf("agent failed: %s", r.stderr)
	}
	// The capture layer's owner is whoever the agent was: make it a
	// stranger, which Apply must not copy (as root; rootless, the layer
	// is the caller's own and the stripping is checked alone).
	strangers := map[string]fs.FileMode{"suid": 0o755 | fs.ModeSetuid, "sgid": 0o750 | fs.ModeSetgid, "shared": 0o775 | fs.ModeSetgid}
	if os.Geteuid() != 0 {
		strangers = nil
	}
	for p, mode := range strangers {
		if err := os.Lchown(filepath.Join(Upper(cfg), p), 4321, 4321); err != nil {
			t.Fatal(err)
		}
		// chown cleared the bits; put them back as the agent had them.
		if err := os.Chmod(filepath.Join(Upper(cfg), p), mode); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := Capture(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stripped := map[string]string{}
	for _, c := range cs {
		stripped[c.Path] = strings.Join(c.Stripped, ",")
	}
	want := map[string]string{"suid": "setuid", "sgid": "setgid", "tool": "setuid", "shared": ""}
	for p, w := range want {
		if stripped[p] != w {
			t.Errorf("%s: stripped %q, want %q", p, stripped[p], w)
		}
	}
	dir := t.TempDir()
	diffDir, preDir := filepath.Join(dir, "fs-diff"), filepath.Join(dir, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"suid", "sgid", "tool"} {
		fi, err := os.Lstat(filepath.Join(diffDir, "files", p))
		if err != nil || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("fs-diff's copy of %s: %v, %v", p, fi.Mode(), err)
		}
	}
	read, err := ReadChanges(filepath.Join(diffDir, "changes.json"))
	if err != nil {
		t.Fatal(err)
	}
	pre := hashOf(t, cfg.Workspace)
	if err := Apply(cfg.Workspace, diffDir, read); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	for p, mode := range map[string]fs.FileMode{"suid": 0o755, "sgid": 0o750, "tool": 0o755, "shared": fs.ModeDir | fs.ModeSetgid | 0o775} {
		fi, err := os.Lstat(filepath.Join(cfg.Workspace, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s applied as %v, want %v", p, fi.Mode(), mode)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if p != "tool" && (int(st.Uid) != uid || int(st.Gid) != gid) {
			t.Errorf("%s is owned by %d:%d, want the invoking user %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
	if err := Revert(cfg.Workspace, preDir, read); err != nil {
		t.Fatal(err)
	}
	if got := hashOf(t, cfg.Workspace); got != pre {
		t.Errorf("after Revert the workspace hashes to %s, want %s", got, pre)
	}
	// A list from elsewhere that asks for setuid gets none either.
	for i := range read {
		if read[i].Path == "suid" {
			read[i].Mode |= fs.ModeSetuid
		}
	}
	if err := Apply(cfg.Workspace, diffDir, read); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(cfg.Workspace, "suid")); fi.Mode()&fs.ModeSetuid != 0 {
		t.Errorf("Apply set setuid from the list: %v", fi.Mode())
	}
}

// TestFileCapsStripped: a file with file capabilities in the capture layer
// is listed as stripped, copied (not linked) into fs-diff without them,
// and applied without them.
func TestFileCapsStripped(t *testing.T) {
	t.Parallel()
	needRoot(t, "planting file capabilities in the capture layer needs CAP_SETFCAP on the host, which neither a rootless caller nor its agent has")
	cfg := newConfig(t, map[string]string{"a": "a"})
	if r := run(t, cfg, "printf 'x' > capped"); r.code != 0 {
		t.Fatalf("agent failed: %s", r.stderr)
	}
	// v2 file capabilities: cap_net_raw permitted and effective. The agent
	// has no CAP_SETFCAP; a copy-up can carry them.
	caps := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if err := unix.Lsetxattr(filepath.Join(Upper(cfg), "capped"), "security.capability", caps, 0); err != nil {
		t.Fatalf("set file capabilities (the tests run as root): %v", err)
	}
	cs, err := Capture(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || strings.Join(cs[0].Stripped, ",") != StrippedCapability {
		t.Fatalf("changes %+v, want capped stripped of its capability", cs)
	}
	dir := t.TempDir()
	diffDir, preDir := filepath.Join(dir, "fs-diff"), filepath.Join(dir, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(diffDir, "files", "capped")} {
		if _, err := unix.Lgetxattr(p, "security.capability", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
			t.Errorf("%s has file capabilities: %v", p, err)
		}
	}
	if err := Apply(cfg.Workspace, diffDir, cs); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Lgetxattr(filepath.Join(cfg.Workspace, "capped"), "security.capability", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
		t.Errorf("the applied file has file capabilities: %v", err)
	}
}

// TestOddNames: a name that is not UTF-8 is captured, exported, written
// to changes.json losslessly, applied and reverted; a fifo and a socket
// are listed as not captured.
func TestOddNames(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, map[string]string{"old-\xe9.txt": "o\n"})
	script := `set -e
printf 'n' > "$(printf 'caf\351')"
mkdir "$(printf 'd\377')" && echo x > "$(printf 'd\377')/f"
ln -s "$(printf 't\376')" link
echo more >> "$(printf 'old-\351.txt')"
mkfifo pipe
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("sock")'
`
	if r := run(t, cfg, script); r.code != 0 {
		t.Fatalf("agent failed: %s", r.stderr)
	}
	pre := hashOf(t, cfg.Workspace)
	cs, un, err := CaptureAll(cfg)
	if err != nil {
		t.Fatal(err)
	}
	diffLists(t, "changes", summarize(cs), []string{
		"caf\xe9 created file 0644",
		"d\xff created dir 0755",
		"d\xff/f created file 0644",
		"link created symlink 0777",
		"old-\xe9.txt modified file 0644",
	})
	if b, _ := json.Marshal(un); string(b) != `[{"path":"pipe","kind":"fifo"},{"path":"sock","kind":"socket"}]` {
		t.Errorf("uncaptured: %s", b)
	}
	dir := t.TempDir()
	diffDir, preDir := filepath.Join(dir, "fs-diff"), filepath.Join(dir, "fs-pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{diffDir, preDir} {
		filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if !utf8.ValidString(p) {
				t.Errorf("the mirror holds a name that is not UTF-8: %q", p)
			}
			return err
		})
	}
	raw, _ := os.ReadFile(filepath.Join(diffDir, "changes.json"))
	for _, want := range []string{`"path": "caf%E9"`, `"path_b64": "Y2Fm6Q=="`, `"link_target": "t%FE"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("changes.json lacks %s:\n%s", want, raw)
		}
	}
	read, err := ReadChanges(filepath.Join(diffDir, "changes.json"))
	if err != nil {
		t.Fatal(err)
	}
	diffLists(t, "changes read back", summarize(read), summarize(cs))
	if read[3].LinkTarget != "t\xfe" {
		t.Errorf("link target read back as %q", read[3].LinkTarget)
	}
	merged, err := TreeHashLayers(Upper(cfg), cfg.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(cfg.Workspace, diffDir, read); err != nil {
		t.Fatal(err)
	}
	if got := hashOf(t, cfg.Workspace); got != merged {
		t.Errorf("after Apply the workspace hashes to %s, the run's result to %s", got, merged)
	}
	if err := Revert(cfg.Workspace, preDir, read); err != nil {
		t.Fatal(err)
	}
	if got := hashOf(t, cfg.Workspace); got != pre {
		t.Errorf("after Revert the workspace hashes to %s, want %s", got, pre)
	}
}

func TestMirrorPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a/b.txt":        "a/b.txt",
		"d\xff/f":        ".dal-b64-ZP8/f",
		"caf\xe9":        ".dal-b64-Y2Fm6Q",
		".dal-b64-ZP8/f": ".dal-b64-LmRhbC1iNjQtWlA4/f",
		"x/.dal-b64-":    "x/.dal-b64-LmRhbC1iNjQt",
		"x/a.dal-b64-b":  "x/a.dal-b64-b",
	} {
		if got := MirrorPath(in); got != want {
			t.Errorf("MirrorPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNameEncoding: the *_b64 companions are read only for names that need
// them, must agree with the text, and a decoded name is validated like any
// other (no traversal through an encoding).
func TestNameEncoding(t *testing.T) {
	t.Parallel()
	h := digest.Bytes([]byte("a"))
	for _, tc := range []struct {
		name, json, want string
	}{
		{"plain", `{"path":"a","op":"created","kind":"file","mode":"0644","hash":"` + h + `","size":1}`, ""},
		{"encoded", `{"path":"%FF","path_b64":"/w==","op":"created","kind":"file","mode":"0644","hash":"` + h + `","size":1}`, ""},
		{"encoded UTF-8", `{"path":"a","path_b64":"YQ==","op":"created","kind":"file","mode":"0644","hash":"` + h + `","size":1}`, "does not match"},
		{"text disagrees", `{"path":"harmless","path_b64":"/w==","op":"created","kind":"file","mode":"0644","hash":"` + h + `","size":1}`, "does not match"},
		{"traversal", `{"path":"../%FF","path_b64":"Li4v/w==","op":"created","kind":"file","mode":"0644","hash":"` + h + `","size":1}`, "not a clean relative path"},
		{"not base64", `{"path":"%FF","path_b64":"!!","op":"created","kind":"file","mode":"0644","hash":"` + h + `","size":1}`, "not base64"},
	} {
		file := filepath.Join(t.TempDir(), "changes.json")
		os.WriteFile(file, []byte("["+tc.json+"]"), 0o644)
		_, err := ReadChanges(file)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkApply1000: Apply of 1,000 modified 4 KiB files (after an
// untimed Revert), the step that ends every record.
func BenchmarkApply1000(b *testing.B) {
	cfg := benchWorkspace(b, 1000, 4096)
	if r := run(b, cfg, `for f in d*/*; do echo more >> $f; done`); r.code != 0 {
		b.Fatal(r.stderr)
	}
	cs, err := Capture(cfg)
	if err != nil || len(cs) != 1000 {
		b.Fatalf("%d changes, %v", len(cs), err)
	}
	bundle := b.TempDir()
	diffDir, preDir := filepath.Join(bundle, "diff"), filepath.Join(bundle, "pre")
	if err := Export(cfg, cs, diffDir, preDir); err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := Apply(cfg.Workspace, diffDir, cs); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		b.StopTimer()
		if err := Revert(cfg.Workspace, preDir, cs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2])/1e6, "p50-ms")
}
