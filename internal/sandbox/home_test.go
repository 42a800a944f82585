package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeHome makes a home directory holding the secrets an agent would go
// for, git's configuration, a pyenv-like toolchain whose python3 is a bash
// script that forks, and a tool of its own on PATH; it returns the home
// and the agent's PATH.
func fakeHome(t *testing.T) (home, path string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	writeTree(t, home, map[string]string{
		".ssh/id_ed25519":         "SECRET-ssh",
		".aws/credentials":        "SECRET-aws",
		".netrc":                  "SECRET-netrc",
		".config/dal/signing.key": "SECRET-dal-key",
		".config/other/settings":  "other settings",
		".gitconfig":              "[user]\n\tname = gitconfig-shown\n",
		".pyenv/version":          "3.99\n",
		"bin/":                    "",
	})
	shim := filepath.Join(home, ".pyenv/shims/python3")
	tool := filepath.Join(home, ".pyenv/versions/3.99/bin/python3")
	own := filepath.Join(home, "bin/mytool")
	for p, body := range map[string]string{
		// As pyenv's shim does: a bash script that runs a helper in a
		// subshell (a fork) to find the version, then execs it.
		shim: "#!/bin/bash\nroot=\"$(cd \"$(dirname \"$0\")/..\" && pwd)\"\nv=\"$(cat \"$root/version\")\"\nexec \"$root/versions/$v/bin/python3\" \"$@\"\n",
		tool: "#!/bin/sh\necho \"pyenv python $*\"\n",
		own:  "#!/bin/sh\necho mytool-ran\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home, filepath.Dir(shim) + ":" + filepath.Join(home, "bin") + ":/usr/sbin:/usr/bin:/sbin:/bin"
}

// probeHome is the agent: it tries every secret and runs the toolchains.
const probeHome = `for f in .ssh/id_ed25519 .aws/credentials .netrc .config/dal/signing.key .config/other/settings; do
  cat "$HOME/$f" 2>/dev/null && echo " <- $f"
done
cat /etc/shadow 2>/dev/null | head -c 64; echo
grep -h name "$HOME/.gitconfig"
python3 --version
mytool
echo probe > "$HOME/planted" 2>/dev/null && echo planted
id -u
grep CapEff /proc/self/status
`

// TestHomeHidden: in an overlay sandbox and a direct one, the agent sees
// none of the home's secrets nor dal's key, not even below a --bind of
// their parent, nor /etc/shadow's hashes, and cannot write in the home;
// git's configuration shows, and the toolchain its PATH points into under
// the home (a bash shim that forks) still runs, as does a tool of the
// user's own under it.
func TestHomeHidden(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		t.Run("direct="+strconv.FormatBool(direct), func(t *testing.T) {
			t.Parallel()
			home, path := fakeHome(t)
			var cfg Config
			if direct {
				cfg, _ = directConfig(t)
			} else {
				cfg = newConfig(t, nil)
			}
			// --bind of the key's parent: the key stays hidden.
			h := Home{Dir: home, Path: path, Writable: []string{filepath.Join(home, ".config")},
				Secrets: []string{filepath.Join(home, ".config/dal")}, Workdir: cfg.Workspace}
			if err := cfg.HideHome(h); err != nil {
				t.Fatal(err)
			}
			dir := cfg.Workspace
			if direct {
				dir = t.TempDir()
			}
			cmd, err := Command(cfg, []string{"/bin/sh", "-c", probeHome}, []string{"PATH=" + path, "HOME=" + home}, dir)
			if err != nil {
				t.Fatal(err)
			}
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v: %s", err, errb.String())
			}
			got := out.String()
			for _, leak := range []string{"SECRET", "root:"} {
				if strings.Contains(got, leak) {
					t.Errorf("the agent read a secret (%q):\n%s", leak, got)
				}
			}
			for _, want := range []string{"other settings <- .config/other/settings", "gitconfig-shown", "pyenv python --version", "mytool-ran",
				"\n" + strconv.Itoa(os.Geteuid()) + "\n", "CapEff:\t0000000000000000"} {
				if !strings.Contains(got, want) {
					t.Errorf("the agent's output lacks %q:\n%s%s", want, got, errb.String())
				}
			}
			if strings.Contains(got, "planted") {
				t.Errorf("the agent wrote in the private home:\n%s", got)
			}
			if _, err := os.Stat(filepath.Join(home, "planted")); err == nil {
				t.Errorf("the agent's write reached the host's home")
			}
		})
	}
}

// TestHomeHoldingTheWorkspaceIsRefused: a workspace (or a direct
// sandbox's working directory) that holds the home would show all of it;
// it is refused in one sentence naming --bind, unless the user binds the
// home whole.
func TestHomeHoldingTheWorkspaceIsRefused(t *testing.T) {
	t.Parallel()
	home, path := fakeHome(t)
	cfg := Config{Workspace: filepath.Dir(home), Staging: filepath.Join(t.TempDir(), "staging")}
	err := cfg.HideHome(Home{Dir: home, Path: path})
	if err == nil || !strings.Contains(err.Error(), "--bind "+home) {
		t.Fatalf("HideHome: %v, want a refusal naming --bind", err)
	}
	cfg = Config{Direct: true}
	err = cfg.HideHome(Home{Dir: home, Path: path, Workdir: home})
	if err == nil || !strings.Contains(err.Error(), "working directory") {
		t.Fatalf("HideHome (direct): %v, want a refusal", err)
	}
	cfg = Config{Direct: true}
	if err := cfg.HideHome(Home{Dir: home, Path: path, Workdir: home, Writable: []string{home}}); err != nil {
		t.Fatalf("HideHome with the home bound whole: %v", err)
	}
	for _, h := range cfg.Hidden {
		if h == home {
			t.Errorf("the home bound whole is hidden: %v", cfg.Hidden)
		}
	}
}

// TestKernelSharingRefused: the agent's tree cannot reach the kernel's
// keyrings (add_key, keyctl, request_key) nor open an AF_VSOCK socket, in
// either kind of sandbox; other sockets still open. A real C program,
// compiled here, makes the calls (on x86-64 through the 32-bit ABI too,
// int 0x80, when the kernel has it).
func TestKernelSharingRefused(t *testing.T) {
	t.Parallel()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatal("gcc is needed to build the probe (scripts/test-deps.sh installs it)")
	}
	src := filepath.Join(t.TempDir(), "probe.c")
	if err := os.WriteFile(src, []byte(keyProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	probe := filepath.Join(bins, "probe")
	if out, err := exec.Command(gcc, "-O", "-o", probe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	// Outside: the calls work (the kernel has keyrings and vsock), so a
	// refusal inside is the sandbox's.
	out, err := exec.Command(probe).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "keyctl 0\n") || !strings.Contains(string(out), "inet 0\n") {
		t.Fatalf("the probe outside the sandbox: %v\n%s", err, out)
	}
	for _, direct := range []bool{false, true} {
		t.Run("direct="+strconv.FormatBool(direct), func(t *testing.T) {
			t.Parallel()
			var cfg Config
			if direct {
				cfg, _ = directConfig(t)
			} else {
				cfg = newConfig(t, nil)
				cfg.Binds = []string{bins}
			}
			// A child of the agent's, so the whole tree is covered.
			r := run(t, cfg, "sh -c "+probe)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			wants := []string{"add_key 1\n", "keyctl 1\n", "request_key 1\n", "vsock 1\n", "inet 0\n"}
			if strings.Contains(string(out), "keyctl32 0\n") {
				wants = append(wants, "keyctl32 1\n", "vsock32 1\n")
			}
			for _, want := range wants {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("want %q (name errno):\n%s", want, r.stdout)
				}
			}
		})
	}
}

// keyProbe prints each call's errno (0: it worked).
const keyProbe = `#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AF_VSOCK_ 40
#define KEY_SPEC_SESSION_KEYRING -3
static void show(const char *what, long r) { printf("%s %d\n", what, r < 0 ? errno : 0); }
int main(void) {
	show("add_key", syscall(SYS_add_key, "user", "dal-probe", "x", 1, KEY_SPEC_SESSION_KEYRING));
	show("keyctl", syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, KEY_SPEC_SESSION_KEYRING, 1));
	show("request_key", syscall(SYS_request_key, "user", "dal-probe", NULL, 0));
	errno = 0;
	show("vsock", socket(AF_VSOCK_, SOCK_STREAM, 0));
	show("inet", socket(AF_INET, SOCK_STREAM, 0));
#if defined(__x86_64__)
	/* The 32-bit ABI (int 0x80), by its own numbers: keyctl, socket. */
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(288L), "b"(0L), "c"((long)KEY_SPEC_SESSION_KEYRING), "d"(1L) : "memory");
	printf("keyctl32 %ld\n", r < 0 ? -r : 0);
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(359L), "b"((long)AF_VSOCK_), "c"((long)SOCK_STREAM), "d"(0L) : "memory");
	printf("vsock32 %ld\n", r < 0 ? -r : 0);
#endif
	return 0;
}
`

// TestToolchainDirs: a PATH entry under the home shows its toolchain's
// root (a version manager whole), cargo's proxies with rustup's
// toolchains but not ~/.cargo (the registry token), ~/.local/bin with
// the libraries its scripts import, any other entry alone.
func TestToolchainDirs(t *testing.T) {
	t.Parallel()
	const h = "/home/u"
	for _, tc := range []struct {
		entry string
		want  []string
	}{
		{"/home/u/.pyenv/shims", []string{"/home/u/.pyenv"}},
		{"/home/u/.pyenv/plugins/pyenv-virtualenv/shims", []string{"/home/u/.pyenv"}},
		{"/home/u/.nvm/versions/node/v22.1.0/bin", []string{"/home/u/.nvm"}},
		{"/home/u/.cargo/bin", []string{"/home/u/.cargo/bin", "/home/u/.rustup"}},
		{"/home/u/.local/bin", []string{"/home/u/.local/bin", "/home/u/.local/lib", "/home/u/.local/share/pipx", "/home/u/.local/share/uv"}},
		{"/home/u/go/bin", []string{"/home/u/go/bin"}},
		{"/home/u/bin", []string{"/home/u/bin"}},
	} {
		if got := toolchainDirs(h, tc.entry); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("toolchainDirs(%s) = %v, want %v", tc.entry, got, tc.want)
		}
	}
}

// TestHideHomeShows: what HideHome hides and shows for a home, a PATH
// and the user's binds; a relative or missing bind path is refused.
func TestHideHomeShows(t *testing.T) {
	t.Parallel()
	home, path := fakeHome(t)
	writeTree(t, home, map[string]string{".cargo/credentials.toml": "token", ".cargo/bin/cargo": "", ".rustup/settings.toml": "", "data/x": ""})
	cfg := Config{Workspace: t.TempDir()}
	h := Home{Dir: home, Path: path + ":" + filepath.Join(home, ".cargo/bin"), ReadOnly: []string{filepath.Join(home, "data")},
		Need: []string{filepath.Join(home, "bin/mytool"), "/usr/bin/env"}, Secrets: []string{filepath.Join(home, ".config/dal")}}
	if err := cfg.HideHome(h); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Hidden, home) || !slices.Contains(cfg.Hidden, "/root") {
		t.Errorf("hidden %v, want %s and /root", cfg.Hidden, home)
	}
	for _, want := range []string{".gitconfig", ".pyenv", "bin", ".cargo/bin", ".rustup", "data", "bin/mytool"} {
		if !slices.Contains(cfg.Binds, filepath.Join(home, want)) {
			t.Errorf("binds %v lack ~/%s", cfg.Binds, want)
		}
	}
	for _, not := range []string{filepath.Join(home, ".cargo"), filepath.Join(home, ".config/git"), "/usr/bin/env"} {
		if slices.Contains(cfg.Binds, not) {
			t.Errorf("binds %v hold %s", cfg.Binds, not)
		}
	}
	if !slices.Contains(cfg.Secrets, filepath.Join(home, ".config/dal")) {
		t.Errorf("secrets %v lack dal's key directory", cfg.Secrets)
	}
	for _, bad := range []Home{{Dir: home, ReadOnly: []string{"rel/path"}}, {Dir: home, Writable: []string{filepath.Join(home, "missing")}}} {
		if err := (&Config{Workspace: t.TempDir()}).HideHome(bad); err == nil {
			t.Errorf("HideHome(%+v) accepted a bad bind", bad)
		}
	}
}

// TestHideHomePrivateTmp: a direct sandbox's private /tmp keeps the
// working directory there read-write, shown over it; a working directory
// or a bind that holds /tmp keeps the host's whole /tmp; an overlay
// sandbox's private /tmp is its own affair.
func TestHideHomePrivateTmp(t *testing.T) {
	t.Parallel()
	ws := t.TempDir() // under /tmp
	for _, tc := range []struct {
		name    string
		cfg     Config
		h       Home
		private bool   // PrivateTmp stays set
		rw      string // in WritableBinds
	}{
		{"working directory in /tmp", Config{Direct: true, PrivateTmp: true}, Home{Workdir: ws}, true, ws},
		{"working directory elsewhere", Config{Direct: true, PrivateTmp: true}, Home{Workdir: "/usr"}, true, ""},
		{"working directory /tmp", Config{Direct: true, PrivateTmp: true}, Home{Workdir: "/tmp"}, false, ""},
		{"--bind /tmp", Config{Direct: true, PrivateTmp: true}, Home{Workdir: "/usr", Writable: []string{"/tmp"}}, false, "/tmp"},
		{"overlay sandbox", Config{Workspace: ws, PrivateTmp: true}, Home{}, true, ""},
	} {
		cfg := tc.cfg
		if err := cfg.HideHome(tc.h); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.PrivateTmp != tc.private {
			t.Errorf("%s: PrivateTmp %v, want %v", tc.name, cfg.PrivateTmp, tc.private)
		}
		if tc.rw != "" && !slices.Contains(cfg.WritableBinds, tc.rw) {
			t.Errorf("%s: writable binds %v lack %s", tc.name, cfg.WritableBinds, tc.rw)
		}
		if tc.rw == "" && len(cfg.WritableBinds) != 0 {
			t.Errorf("%s: writable binds %v, want none", tc.name, cfg.WritableBinds)
		}
	}
}
