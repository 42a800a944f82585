package e2e

// The containment suite (SECURITY.md): each test runs one attack of a
// hostile agent or a hostile bundle against the built binaries and asserts
// that the host side is untouched and that dal's report is truthful.

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/sandbox"
)

// bundleHolds reports the bundle files (relative paths) that contain s.
func bundleHolds(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			rel, _ := filepath.Rel(dir, p)
			hits = append(hits, rel)
		}
		return nil
	})
	return hits
}

// A kept secret reaches no file of the bundle, however the agent leaks it
// (stdout, stderr, a file it writes), and no plain hash of it is stored; a
// kept plain setting is stored by value; the bundle replays exactly on a
// machine where neither variable is set.
func TestSecretsNeverReachTheBundle(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	const secret = "sk-e2e-9f8e7d6c5b4a"
	agent := `import os, sys
k = os.environ["E2E_API_KEY"]
print("key:", k)
print("url:", os.environ["E2E_BASE_URL"])
sys.stderr.write("auth " + k + "\n")
open("leak.txt", "w").write("token=" + k + "\n")
`
	if err := os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "E2E_API_KEY=" + secret, "E2E_BASE_URL=http://127.0.0.1:9/v1"}
	rec := dalIn(t, ws, env, "record", "--keep-env", "E2E_API_KEY", "--keep-env", "E2E_BASE_URL", "--out", out, "--", "python3", "agent.py")
	if rec.code != 0 || !strings.Contains(rec.stdout, "key: "+secret) {
		t.Fatalf("record: %d %q %q", rec.code, rec.stdout, rec.stderr)
	}
	if hits := bundleHolds(t, out, secret); len(hits) > 0 {
		t.Fatalf("the secret reached the bundle in %v", hits)
	}
	var e struct {
		Kept       map[string]string `json:"kept"`
		KeptValues map[string]string `json:"kept_values"`
		Secrets    []string          `json:"secrets"`
		Scrubbed   []string          `json:"scrubbed"`
	}
	b := mustRead(t, filepath.Join(out, "env.json"))
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Kept) != 0 || e.KeptValues["E2E_BASE_URL"] != "http://127.0.0.1:9/v1" || len(e.Secrets) != 1 || e.Secrets[0] != "E2E_API_KEY" {
		t.Fatalf("env.json keeps the wrong things: %s", b)
	}
	for _, want := range []string{"logs/stdout", "logs/stderr", "fs-diff/files/leak.txt"} {
		if !strings.Contains(strings.Join(e.Scrubbed, " "), want) {
			t.Errorf("env.json's scrubbed list %v misses %s", e.Scrubbed, want)
		}
	}
	if !bytes.Contains(mustRead(t, filepath.Join(out, "logs/stdout")), []byte("key: [REDACTED]")) {
		t.Errorf("stdout in the bundle: %s", mustRead(t, filepath.Join(out, "logs/stdout")))
	}
	// The workspace got the agent's real output.
	if got := string(mustRead(t, filepath.Join(ws, "leak.txt"))); got != "token="+secret+"\n" {
		t.Errorf("the applied file is %q", got)
	}
	// Neither variable set: the replay gets the recorded URL and a
	// placeholder key, and is exact.
	if err := os.Remove(filepath.Join(ws, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	rep := dalIn(t, ws, []string{env[0], "E2E_API_KEY=", "E2E_BASE_URL="}, "replay", out)
	if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
		t.Fatalf("replay: %d %q %q", rep.code, rep.stdout, rep.stderr)
	}
	if !strings.Contains(rep.stderr, "recorded values of E2E_BASE_URL") || !strings.Contains(rep.stderr, "secrets E2E_API_KEY a placeholder") {
		t.Errorf("replay does not say which values it used: %q", rep.stderr)
	}
	if hits := bundleHolds(t, out, secret); len(hits) > 0 {
		t.Fatalf("after replay, the secret is in the bundle in %v", hits)
	}
}

// A bundle signed by someone else is refused by replay, revert and diff;
// accepted for one command with --trust-signer, it still does not choose
// the workspace: revert and replay want --workspace.
func TestForeignBundlesAreNotTrusted(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	out := filepath.Join(t.TempDir(), "run")
	alice := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "alice")}
	bob := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "bob")}
	if r := dalIn(t, ws, alice, "record", "--out", out, "--", "python3", "agent.py"); r.code != 0 {
		t.Fatalf("record: %q", r.stderr)
	}
	before := treeHash(t, ws)
	var fp string
	for _, args := range [][]string{{"revert", out}, {"replay", out}, {"diff", out, out}} {
		r := dalIn(t, ws, bob, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "which you do not trust") || !strings.Contains(r.stderr, "--trust-signer") {
			t.Fatalf("%s of a foreign bundle: %d %q", args[0], r.code, r.stderr)
		}
		_, rest, _ := strings.Cut(r.stderr, "signed by key ")
		fp, _, _ = strings.Cut(rest, ",")
	}
	if treeHash(t, ws) != before {
		t.Fatal("a refused command changed the workspace")
	}
	for _, cmd := range []string{"revert", "replay"} {
		r := dalIn(t, ws, bob, cmd, "--trust-signer", fp, out)
		if r.code != 2 || !strings.Contains(r.stderr, "not by your own key") || !strings.Contains(r.stderr, "--workspace") {
			t.Fatalf("%s --trust-signer without --workspace: %d %q", cmd, r.code, r.stderr)
		}
	}
	if treeHash(t, ws) != before {
		t.Fatal("a refused command changed the workspace")
	}
	if r := dalIn(t, ws, bob, "revert", "--trust-signer", fp, "--workspace", ws, out); r.code != 0 {
		t.Fatalf("revert with --trust-signer and --workspace: %d %q", r.code, r.stderr)
	}
}

func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h, err := sandbox.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Attack 1 of the containment issue: the agent marks an iteration for
// report.md, then plants report.md.dal-place (the name dal used to write
// the selected artifact through) as a symlink to a host file. Placing the
// selection after the agent exits must not write the host file; the
// artifact still reaches the workspace.
func TestIterationPlaceDoesNotFollowAPlantedSymlink(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	victim, err := os.CreateTemp("/var/tmp", "dal-e2e-victim-")
	if err != nil {
		t.Fatal(err)
	}
	victim.WriteString("host file\n")
	victim.Close()
	t.Cleanup(func() { os.Remove(victim.Name()) })
	os.Chmod(victim.Name(), 0o644)
	script := `set -e
echo "draft 1" > report.md
"$DAL_EXEC" iteration --score 0.9 report.md
ln -s ` + victim.Name() + ` report.md.dal-place
mkdir -p sub
ln -s ` + filepath.Dir(victim.Name()) + ` sub/evil
`
	os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(script), 0o644)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "DAL_EXEC=" + bin.exec}
	out := filepath.Join(t.TempDir(), "b")
	r := dalIn(t, ws, env, "record", "--keep-env", "DAL_EXEC", "--out", out, "--", "sh", "agent.sh")
	if got := string(mustRead(t, victim.Name())); got != "host file\n" {
		t.Fatalf("the host file was written through the planted symlink: %q (record exit %d: %s)", got, r.code, r.stderr)
	}
	if fi, _ := os.Stat(victim.Name()); fi.Mode().Perm() != 0o644 {
		t.Fatalf("the host file's mode changed to %v", fi.Mode())
	}
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	if got := string(mustRead(t, filepath.Join(ws, "report.md"))); got != "draft 1\n" {
		t.Errorf("report.md in the workspace is %q", got)
	}
}

// A hostile agent's probes, each of which reached the host on 1690cec:
// block devices, a host SysV shared-memory segment, a setuid program
// applied to the workspace, a non-UTF-8 file name that lost the run.
func TestHostileAgentProbesAreContained(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	agent := `import os, subprocess, sys
blocks = sorted(os.listdir("/sys/block"))
for b in blocks:
    try:
        os.close(os.open("/dev/" + b, os.O_RDWR))
        print("OPENED /dev/" + b)
    except OSError as e:
        print("refused /dev/" + b)
for d in ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/full", "/dev/random"]:
    os.close(os.open(d, os.O_RDWR))
print("devices ok")
out = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True).stdout
shmid = out.strip().split()[-1] if out.strip() else "none"
for l in open("/proc/sysvipc/shm").read().splitlines()[1:]:
    f = l.split()
    if f[1] == shmid:
        print("shmkey", f[0])
open("suid", "w").write("#!/bin/sh\n")
os.chmod("suid", 0o4755)
open(b"bad\xffname.txt", "wb").write(b"odd\n")
os.mkfifo("pipe")
`
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	out := filepath.Join(t.TempDir(), "b")
	r := dalIn(t, ws, env, "record", "--out", out, "--", "python3", "agent.py")
	if r.code != 0 || !strings.Contains(r.stdout, "devices ok") {
		t.Fatalf("record: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "OPENED") {
		t.Errorf("the agent opened a block device:\n%s", r.stdout)
	}
	// The segment the agent made (found by its random key) lives in its
	// own IPC namespace, not on the host.
	key := ""
	for _, l := range strings.Split(r.stdout, "\n") {
		if k, ok := strings.CutPrefix(l, "shmkey "); ok {
			key = k
		}
	}
	if key == "" {
		t.Fatalf("the agent could not make a shared-memory segment to probe with:\n%s", r.stdout)
	}
	for _, l := range strings.Split(string(mustRead(t, "/proc/sysvipc/shm")), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 1 && f[0] == key {
			exec.Command("ipcrm", "-m", f[1]).Run()
			t.Errorf("the agent's shared-memory segment (key %s) is on the host", key)
		}
	}
	fi, err := os.Stat(filepath.Join(ws, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Errorf("a setuid program reached the workspace: %v", fi.Mode())
	}
	if !strings.Contains(r.stderr, "suid had setuid, removed") || !strings.Contains(r.stderr, "made a fifo at pipe: not captured") {
		t.Errorf("record does not report the stripped bit or the fifo:\n%s", r.stderr)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "bad\xffname.txt")); err != nil || string(got) != "odd\n" {
		t.Errorf("the non-UTF-8 name was not applied: %q %v", got, err)
	}
	if r := dalIn(t, ws, env, "verify", out); r.code != 0 {
		t.Errorf("verify: %d %s", r.code, r.stderr)
	}
}

// Text from a bundle reaches the terminal with its escape sequences
// neutralized: an OSC 52 clipboard write and a title change in the
// agent's output are shown, not executed, by diff and replay.
func TestBundleTextIsEscapedOnTheTerminal(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(`import random
print("\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;owned\x07", random.random())
`), 0o644)
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	dir := t.TempDir()
	for _, seed := range []string{"1", "2"} {
		if r := dalIn(t, ws, env, "record", "--no-apply", "--seed", seed, "--out", filepath.Join(dir, seed), "--", "python3", "agent.py"); r.code != 0 {
			t.Fatalf("record: %s", r.stderr)
		}
	}
	d := dalIn(t, ws, env, "diff", filepath.Join(dir, "1"), filepath.Join(dir, "2"))
	if d.code != 1 || !strings.Contains(d.stdout, "DIFFERENT  stdout") {
		t.Fatalf("diff: %d %q", d.code, d.stdout)
	}
	if strings.ContainsAny(d.stdout+d.stderr, "\x1b\x07") {
		t.Errorf("diff printed raw escape sequences: %q", d.stdout)
	}
}

// A kept secret that the agent sends in a JSON field not named like a
// credential never reaches the bundle (HAR,
// prompts, match keys), and the bundle replays exactly, offline, where the
// secret is not set.
func TestSecretSentOverTheNetworkIsScrubbed(t *testing.T) {
	t.Parallel()
	srv := startLLMServer(t, false)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(`import json, os, urllib.request
key = os.environ["OPENAI_API_KEY"]
body = {"model": "test-model", "note": "sent with " + key, "messages": [{"role": "user", "content": "hello"}]}
req = urllib.request.Request(os.environ["LLM_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    method="POST", headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as r:
    print(json.load(r)["choices"][0]["message"]["content"])
`), 0o644)
	out := filepath.Join(t.TempDir(), "run")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "OPENAI_API_KEY=" + apiKey, "LLM_BASE_URL=" + srv.base()}
	rec := dalIn(t, ws, env, "record", "--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE_URL", "--out", out, "--", "python3", "agent.py")
	if rec.code != 0 {
		t.Fatalf("record: %d %s %s", rec.code, rec.stdout, rec.stderr)
	}
	if hits := bundleHolds(t, out, apiKey); len(hits) > 0 {
		t.Fatalf("the secret reached the bundle in %v", hits)
	}
	srv.stop()
	rep := dalIn(t, ws, []string{env[0], "OPENAI_API_KEY=", "LLM_BASE_URL="}, "replay", out)
	if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
		t.Fatalf("replay: %d %s %s", rep.code, rep.stdout, rep.stderr)
	}
}

// A Unix socket is reached through the file system whatever the network
// namespace: on 2ce7ff2 a recorded agent talked to a host listener under
// /run. Now host sockets in /run, /var/tmp and anywhere else on the host
// tree are out of reach; syscalls.json lists the attempt on a socket outside
// the sandbox's private directories as a network escape and not the
// sandbox's own (a missing /run/nscd/socket, as curl tries).
func TestHostUnixSocketsAreUnreachable(t *testing.T) {
	t.Parallel()
	var socks []string
	for _, parent := range []string{"/run", "/var/cache"} {
		dir, err := os.MkdirTemp(parent, "dal-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		p := filepath.Join(dir, "svc.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			l.SetDeadline(time.Now())
			if c, err := l.Accept(); err == nil {
				c.Close()
				t.Errorf("the host listener at %s accepted a connection from the recorded agent", p)
			}
			l.Close()
		})
		socks = append(socks, p)
	}
	ws := t.TempDir()
	agent := `import socket, sys
for p in sys.argv[1:] + ["/var/run/nscd/socket"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); s.send(b"escaped\n"); print(p, "CONNECTED")
    except OSError as e:
        print(p, "refused")
`
	os.WriteFile(filepath.Join(ws, "agent.py"), []byte(agent), 0o644)
	out := filepath.Join(t.TempDir(), "b")
	r := dalIn(t, ws, []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}, "record", "--out", out, "--", "python3", "agent.py", socks[0], socks[1])
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "CONNECTED") || strings.Count(r.stdout, "refused") != 3 {
		t.Errorf("the agent's connects:\n%s", r.stdout)
	}
	var escaped []string
	for _, e := range readBoundary(t, out).Escapes {
		if e.Category == "network" {
			escaped = append(escaped, e.Detail)
		}
	}
	if len(escaped) != 1 || !strings.Contains(escaped[0], "unix:"+socks[1]) || !strings.Contains(escaped[0], "outside the sandbox's private directories") {
		t.Errorf("network escapes %q, want only the attempt on %s", escaped, socks[1])
	}
	if strings.Contains(r.stderr, "no route") {
		t.Errorf("record blames a route for a Unix socket:\n%s", r.stderr)
	}
}
