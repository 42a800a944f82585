package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/shim"
)

// Attacks on the sandbox (issue 12), each run by an agent inside it. The
// agent is this test binary, re-executed with agentEnv naming one of
// testAgents: Go gives the exact errno of each attempt.

const agentEnv = "DAL_SANDBOX_TEST_AGENT"

var testAgents = map[string]func(args []string) int{
	"open":    agentOpen,
	"mknod":   agentMknod,
	"pty":     agentPty,
	"shm":     agentShm,
	"uring":   agentUring,
	"tiocsti": agentTiocsti,
	"connect": agentConnect,
}

func runTestAgent(name string, args []string) int {
	fn, ok := testAgents[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no test agent %q\n", name)
		return 2
	}
	return fn(args)
}

// errName is an errno's name ("EPERM"), "ok" for none.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// agentOpen opens each path read-write (else read-only) and prints
// "path: result".
func agentOpen(args []string) int {
	for _, p := range args {
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EROFS) {
			fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		}
		if err == nil {
			unix.Close(fd)
		}
		fmt.Printf("%s: %s\n", p, errName(err))
	}
	return 0
}

// agentMknod tries to make a block device node at each path.
func agentMknod(args []string) int {
	for _, p := range args {
		err := unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0)))
		fmt.Printf("mknod %s: %s\n", p, errName(err))
	}
	return 0
}

// agentPty allocates a pty and sends a line through it.
func agentPty([]string) int {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Printf("pty: open ptmx: %s\n", errName(err))
		return 0
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		fmt.Printf("pty: unlock: %s\n", errName(err))
		return 0
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		fmt.Printf("pty: number: %s\n", errName(err))
		return 0
	}
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Printf("pty: open pts: %s\n", errName(err))
		return 0
	}
	unix.Write(m, []byte("hi\n"))
	buf := make([]byte, 16)
	k, _ := unix.Read(s, buf)
	fmt.Printf("pty %d: %q\n", n, buf[:k])
	return 0
}

// agentShm creates a SysV shared-memory segment with the key in args[0]
// and prints the host name.
func agentShm(args []string) int {
	key, _ := strconv.Atoi(args[0])
	id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|0o600)
	fmt.Printf("shmget: %s %d\n", errName(err), id)
	var u unix.Utsname
	unix.Uname(&u)
	fmt.Printf("hostname %s\n", unix.ByteSliceToString(u.Nodename[:]))
	return 0
}

// agentUring tries to set up an io_uring, and to enter one.
func agentUring([]string) int {
	var params [120]byte // struct io_uring_params
	_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	fmt.Printf("io_uring_setup: %s\n", errName(errnoOrNil(e)))
	_, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, 0, 0, 0, 0, 0, 0)
	fmt.Printf("io_uring_enter: %s\n", errName(errnoOrNil(e)))
	return 0
}

func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// agentConnect connects to the Unix socket args[0], passes an IPv4
// address to a Unix socket, and connects to the IPv4 address args[1].
func agentConnect(args []string) int {
	c, err := net.Dial("unix", args[0])
	if err == nil {
		c.Close()
	}
	fmt.Printf("unix: %s\n", errName(err))
	fd, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: 80, Addr: [4]byte{192, 0, 2, 7}})
	fmt.Printf("unix socket, inet address: %s\n", errName(err))
	host, port, _ := net.SplitHostPort(args[1])
	p, _ := strconv.Atoi(port)
	fd, _ = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: p, Addr: [4]byte(net.ParseIP(host).To4())})
	fmt.Printf("inet: %s\n", errName(err))
	return 0
}

// runAgent runs the test agent name with args in the sandbox of cfg,
// showing this test binary there (it lies under the hidden /tmp).
func runAgent(t *testing.T, cfg Config, name string, args ...string) result {
	t.Helper()
	cmd := agentCommand(t, cfg, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		t.Fatalf("agent %s: %v (stdout %q, stderr %q)", name, err, r.stdout, r.stderr)
	}
	return r
}

func agentCommand(t *testing.T, cfg Config, name string, args ...string) *Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Mounts = append(cfg.Mounts, Mount{Source: exe, Target: exe, ReadOnly: true})
	cmd, err := Command(cfg, append([]string{exe}, args...), []string{agentEnv + "=" + name, "PATH=/usr/bin:/bin"}, cfg.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// lines splits an agent's output into a set.
func lines(s string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out[l] = true
	}
	return out
}

// TestDevices: the agent's /dev holds only the harmless devices. The
// host's block devices and other character devices are not there; a
// block device node planted in the workspace opens nothing (nodev); the
// agent can make no node; /dev/null and friends work, and a pty can be
// allocated.
func TestDevices(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	// A block device node in the workspace, as an earlier run or a
	// received bundle might leave one: the host's first block device.
	var blocks []string
	entries, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			blocks = append(blocks, "/dev/"+e.Name())
		}
	}
	if len(blocks) == 0 {
		t.Fatal("the host has no block device to attack: the test needs one (a loop device will do: losetup -f)")
	}
	var st unix.Stat_t
	if err := unix.Stat(blocks[0], &st); err != nil {
		t.Fatal(err)
	}
	// Planting needs root; a rootless caller can plant none either.
	planted := filepath.Join(cfg.Workspace, "disk")
	if os.Geteuid() == 0 {
		if err := unix.Mknod(planted, unix.S_IFBLK|0o666, int(st.Rdev)); err != nil {
			t.Fatal(err)
		}
	} else {
		planted = ""
	}

	forbidden := append(append([]string{}, blocks...), "/dev/mem", "/dev/kmsg", "/dev/port", "/dev/kvm", "/dev/loop-control",
		"/dev/console", "/dev/tty0", "/dev/fuse", "/dev/net/tun")
	if planted != "" {
		forbidden = append(forbidden, planted)
	}
	r := runAgent(t, cfg, "open", forbidden...)
	got := lines(r.stdout)
	for _, p := range forbidden {
		want := p + ": ENOENT"
		if p == planted {
			want = p + ": EACCES" // nodev
		}
		if !got[want] {
			t.Errorf("opening %s in the sandbox: want %q in:\n%s", p, want, r.stdout)
		}
	}

	allowed := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/fd/0", "/dev/stdout"}
	r = runAgent(t, cfg, "open", allowed...)
	got = lines(r.stdout)
	for _, p := range allowed {
		if !got[p+": ok"] {
			t.Errorf("opening %s in the sandbox failed:\n%s", p, r.stdout)
		}
	}

	r = runAgent(t, cfg, "mknod", "/dev/sdz", "/tmp/sdz", filepath.Join(cfg.Workspace, "sdz"))
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasSuffix(l, ": EPERM") && !strings.HasSuffix(l, ": EROFS") {
			t.Errorf("the agent made a device node: %s", l)
		}
	}

	r = runAgent(t, cfg, "pty")
	if !strings.HasPrefix(r.stdout, "pty 0: \"hi\\n\"") {
		t.Errorf("pty allocation in the sandbox: %q", r.stdout)
	}

	// Nothing else is there.
	ls := run(t, cfg, "ls -A /dev; ls -A /dev/pts")
	want := "fd\nfull\nnull\nptmx\npts\nrandom\nshm\nstderr\nstdin\nstdout\ntty\nurandom\nzero\nptmx\n"
	if ls.stdout != want {
		t.Errorf("the sandbox's /dev holds\n%s\nwant\n%s", ls.stdout, want)
	}
	if r := run(t, cfg, "chmod 600 /dev/null"); r.code == 0 {
		t.Errorf("the agent changed the host's /dev/null")
	}
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("the host's /dev/null: %v, %v", fi.Mode(), err)
	}
}

// TestIPCAndUTS: a SysV segment the agent creates lives in its own IPC
// namespace (not on the host, gone with the sandbox), and its host name is
// the sandbox's.
func TestIPCAndUTS(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	key := 0x0da1 << 16
	key |= os.Getpid() & 0xffff
	r := runAgent(t, cfg, "shm", strconv.Itoa(key))
	if !strings.HasPrefix(r.stdout, "shmget: ok ") {
		t.Fatalf("the agent could not create a segment: %q", r.stdout)
	}
	if id, err := unix.SysvShmGet(key, 0, 0); !errors.Is(err, unix.ENOENT) {
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		t.Errorf("the agent's shared-memory segment (key %#x) is visible on the host: shmget: %v", key, err)
	}
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), " "+strconv.Itoa(key)+" ") {
		t.Errorf("/proc/sysvipc/shm on the host lists the agent's key %d", key)
	}
	if !strings.Contains(r.stdout, "hostname "+hostname+"\n") {
		t.Errorf("the agent's host name: %q, want %q", r.stdout, hostname)
	}
	if h, _ := os.Hostname(); h == hostname {
		t.Errorf("the host's name became %q", h)
	}
}

// TestIOURing: io_uring is refused, and the refusal is listed.
func TestIOURing(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	r := runAgent(t, cfg, "uring")
	if r.stdout != "io_uring_setup: EPERM\nio_uring_enter: EPERM\n" {
		t.Errorf("io_uring in the sandbox: %q", r.stdout)
	}
	denied, err := Denied(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(denied) != 1 || denied[0] != (DeniedWrite{Op: "io_uring_setup"}) {
		t.Errorf("denied writes: %+v, want io_uring_setup", denied)
	}
}

// TestSocketBind: Config.Sockets shows the socket alone (also under the
// hidden /tmp), never the directory around it.
func TestSocketBind(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"secret": "s3cr3t\n"})
	sock := filepath.Join(dir, "dald.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	cfg.Sockets = []string{sock}
	script := `python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(10).decode().strip())' "$SOCK"
cat "$DIR/secret" 2>/dev/null || echo "no secret"
ls -A "$DIR"
echo x > "$DIR/planted" 2>/dev/null # the private /tmp takes it
chmod 777 "$SOCK" 2>/dev/null || echo "no chmod"`
	r := run(t, cfg, script, "SOCK="+sock, "DIR="+dir)
	if want := "hello\nno secret\ndald.sock\nno chmod\n"; r.stdout != want {
		t.Errorf("stdout %q (stderr %q), want %q", r.stdout, r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "planted")); err == nil {
		t.Errorf("the agent wrote into the socket's directory")
	}

	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "secret"), "is not a Unix socket"},
		{filepath.Join(dir, "none.sock"), "does not exist"},
		{"rel.sock", "is not absolute"},
	} {
		c := cfg
		c.Sockets = []string{tc.path}
		if _, err := Command(c, []string{"/bin/true"}, nil, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Sockets %s: %v, want %q", tc.path, err, tc.want)
		}
	}
}

// TestShimReadOnly: the runtime shims, installed under the real /tmp and
// bound as record binds them, cannot be changed by the agent; the next
// Install would replace a tampered tree anyway (see internal/shim).
func TestShimReadOnly(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir, err := shim.Install()
	if err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(dir.PythonPath(), "sitecustomize.py")
	before, err := os.ReadFile(site)
	if err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(t, nil)
	cfg.Binds = []string{string(dir)}
	script := `echo 'import os; os.system("touch /tmp/pwned")' >> "$SITE" && echo appended
rm -f "$SITE" && echo removed
mkdir "$DIR/python/evil" 2>/dev/null && echo "mkdir ok"
true`
	r := run(t, cfg, script, "SITE="+site, "DIR="+string(dir))
	if r.stdout != "" {
		t.Errorf("the agent changed the shims: %q", r.stdout)
	}
	if after, _ := os.ReadFile(site); !bytes.Equal(before, after) {
		t.Errorf("sitecustomize.py changed")
	}
	denied, _ := Denied(cfg)
	var ops []string
	for _, d := range denied {
		if d.Path == site {
			ops = append(ops, d.Op)
		}
	}
	sort.Strings(ops)
	if len(ops) < 2 {
		t.Errorf("the attempts on sitecustomize.py are not listed as denied: %+v", denied)
	}
}
