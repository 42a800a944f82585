package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dal "github.com/dal-runtime/dal"
)

// TestSidecarChecks: a dal-sandbox-init is used only when it is a regular,
// executable file reached without a symbolic link, owned by dal-exec's
// owner and writable by nobody who cannot write dal-exec; anything else is
// refused with the reason.
func TestSidecarChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	write := func(p string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // beyond the umask
			t.Fatal(err)
		}
	}
	write(good, 0o755)
	linked := filepath.Join(dir, "linked")
	if err := os.Symlink(dir, linked); err != nil {
		t.Fatal(err)
	}
	// Owned by another user than dal-exec: as root the sidecar is given
	// away; rootless, dal-exec is a file of root's.
	other := filepath.Join(dir, "other")
	write(other, 0o755)
	otherSelf := ""
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		otherSelf = "/bin/sh"
	}
	tests := []struct {
		name, path string
		mode       os.FileMode // 0: the file at path is made elsewhere
		selfMode   os.FileMode
		self       string // dal-exec: a file of mode selfMode in dir when empty
		want       string // "" = used
	}{
		{name: "regular", path: "s-regular", mode: 0o755, selfMode: 0o755},
		{name: "group-writable like dal-exec", path: "s-group", mode: 0o775, selfMode: 0o775},
		{name: "missing", path: "s-missing", selfMode: 0o755, want: "no such file"},
		{name: "symbolic link", path: "s-link", selfMode: 0o755, want: "symbolic link"},
		{name: "under a symbolic link", path: "linked/good", selfMode: 0o755, want: "symbolic link"},
		{name: "directory", path: "s-dir", selfMode: 0o755, want: "not a regular file"},
		{name: "world-writable", path: "s-world", mode: 0o757, selfMode: 0o755, want: "writable by everyone"},
		{name: "group-writable", path: "s-group2", mode: 0o775, selfMode: 0o755, want: "writable by a group"},
		{name: "set-user-ID", path: "s-setuid", mode: 0o755 | os.ModeSetuid, selfMode: 0o755, want: "set-user-ID"},
		{name: "not executable", path: "s-noexec", mode: 0o644, selfMode: 0o755, want: "cannot be executed"},
		{name: "another owner", path: "other", selfMode: 0o755, self: otherSelf, want: "owned by uid"},
	}
	if err := os.Symlink(good, filepath.Join(dir, "s-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "s-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.path)
		if tt.mode != 0 {
			write(p, tt.mode)
		}
		selfPath := tt.self
		if selfPath == "" {
			selfPath = filepath.Join(dir, "self-"+strings.ReplaceAll(tt.path, "/", "-"))
			write(selfPath, tt.selfMode)
		}
		self, err := openPath(selfPath, 0)
		if err != nil {
			t.Fatal(err)
		}
		f, err := openSidecar(p, self)
		self.Close()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: refused (%v), want it used", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want it refused (%q)", tt.name, err, tt.want)
		}
		if f != nil {
			f.Close()
		}
	}
}

// sidecarCopy copies this test binary, whose TestMain calls Init as
// dal-sandbox-init's main does, to a dal-sandbox-init of its own.
func sidecarCopy(t *testing.T) string {
	t.Helper()
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(t.TempDir(), initArg)
	dst, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSidecarImage: an init started from a dal-sandbox-init of the same
// build runs from it; one of another build re-executes dal-exec's own
// image, which runs the agent. The agent sees the same either way.
func TestSidecarImage(t *testing.T) {
	t.Parallel()
	sidecarPath := sidecarCopy(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, sum, want string
	}{
		{"same build", dal.InitSum(), sidecarPath},
		{"another build", "0-0", self},
	} {
		img := image{sum: tt.sum}
		if img.self, err = openPath("/proc/self/exe", 0); err != nil {
			t.Fatal(err)
		}
		if img.sidecar, err = openPath(sidecarPath, 0); err != nil {
			t.Fatal(err)
		}
		cfg, _ := directConfig(t)
		var ran string
		cfg.BeforeAgent = func(c *Cmd) error {
			ran, err = os.Readlink("/proc/" + strconv.Itoa(c.Process.Pid) + "/exe")
			return err
		}
		cmd := command(t, cfg, "echo $$; cat /proc/1/comm; tr '\\0' ' ' </proc/1/cmdline | cut -c1-16")
		if cmd.Path != "/proc/self/exe" {
			t.Fatalf("the test binary has a dal-sandbox-init beside it (%s): run it from elsewhere", cmd.Path)
		}
		cmd.useImage(img)
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		img.self.Close()
		img.sidecar.Close()
		if ran != tt.want {
			t.Errorf("%s: the init ran %s, want %s", tt.name, ran, tt.want)
		}
		if out.String() != "100\nexe\ndal-sandbox-init\n" {
			t.Errorf("%s: the agent saw %q, want pid 100 and an init named exe and dal-sandbox-init", tt.name, out.String())
		}
	}
}

// TestSidecarStaleWithoutFallback: an init of another build whose
// dal-exec image cannot be executed fails set-up in one sentence; the
// agent never runs.
func TestSidecarStaleWithoutFallback(t *testing.T) {
	t.Parallel()
	sidecarPath := sidecarCopy(t)
	notExec := filepath.Join(t.TempDir(), "dal-exec")
	if err := os.WriteFile(notExec, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := image{sum: "0-0"}
	var err error
	if img.self, err = openPath(notExec, 0); err != nil {
		t.Fatal(err)
	}
	defer img.self.Close()
	if img.sidecar, err = openPath(sidecarPath, 0); err != nil {
		t.Fatal(err)
	}
	defer img.sidecar.Close()
	cfg, host := directConfig(t)
	cmd := command(t, cfg, "echo ran > "+host+"/ran")
	cmd.useImage(img)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "another build") || strings.Contains(se.Msg, "\n") {
		t.Errorf("a stale init without dal-exec's image: %v, want a one-line setup error naming another build", err)
	}
	if _, err := os.Stat(filepath.Join(host, "ran")); err == nil {
		t.Error("the agent ran")
	}
}
