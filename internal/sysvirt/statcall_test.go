package sysvirt

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// statHere makes statFor's call for this process: path (with flags) from
// directory descriptor dir.
func statHere(t *testing.T, s *Supervisor, dir int, path string, flags int) (unix.Statx_t, string, bool) {
	t.Helper()
	p := append([]byte(path), 0)
	c := statCall{dirfd: int32(dir), path: uint64(uintptr(unsafe.Pointer(&p[0]))), flags: flags, buf: 1}
	v := callerView{tgid: os.Getpid(), same: true, pidfd: -1}
	var st unix.Statx_t
	escape, ok := s.statFor(os.Getpid(), c, &v, &st)
	runtime.KeepAlive(p)
	return st, escape, ok
}

// TestStatOneName: a name in a directory descriptor is statted without
// openat2's walk, and still as the caller's call would: a link followed
// or not as its flags say, and a magic link of /proc never followed (the
// caller's call runs, counted as an escape).
func TestStatOneName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	s := New(Config{Clock: true, StartNS: testStart}, -1)
	if st, _, ok := statHere(t, s, fd, "link", 0); !ok || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 5 {
		t.Errorf("stat of a link: ok %v, mode %o, size %d; want the file it names (5 bytes)", ok, st.Mode, st.Size)
	}
	if st, _, ok := statHere(t, s, fd, "link", unix.AT_SYMLINK_NOFOLLOW); !ok || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("lstat of a link: ok %v, mode %o; want the link", ok, st.Mode)
	}
	if _, _, ok := statHere(t, s, fd, "missing", 0); ok {
		t.Error("stat of a missing name answered; the caller's own ENOENT is due")
	}
	procFd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(procFd)
	if _, escape, ok := statHere(t, s, procFd, "0", 0); ok || escape != escapeMagic {
		t.Errorf("stat of /proc/self/fd/0 by name: ok %v, escape %q; want the caller's call, noted %q", ok, escape, escapeMagic)
	}
}

// TestServeThreadWalksAsTheCaller: on the serve thread, which keeps its
// other capabilities, a walk is still refused a directory the caller may
// not search (another user's, mode 0700), as elsewhere; the supervisor
// with its capabilities would have answered.
func TestServeThreadWalksAsTheCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a directory only CAP_DAC_OVERRIDE lets the supervisor search")
	}
	dir, err := os.MkdirTemp("/var/cache", "dal-sysvirt-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(secret, &st); err != nil {
		t.Fatalf("with its capabilities the test process cannot stat %s (%v): nothing to compare", secret, err)
	}
	s := New(Config{Clock: true, StartNS: testStart}, -1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.ServeThread()()
		if s.walker.Load() != int32(unix.Gettid()) {
			t.Error("ServeThread did not take this thread as the serve thread")
		}
		if _, _, ok := statHere(t, s, unix.AT_FDCWD, secret, 0); ok {
			t.Errorf("the serve thread answered a stat of %s, in a directory the caller may not search", secret)
		}
		if _, _, ok := statHere(t, s, unix.AT_FDCWD, dir, 0); !ok {
			t.Errorf("the serve thread could not stat %s itself", dir)
		}
	}()
	<-done
	if _, _, ok := statHere(t, s, unix.AT_FDCWD, secret, 0); ok {
		t.Errorf("a stat off the serve thread answered for %s", secret)
	}
	if err := unix.Stat(secret, &st); err != nil {
		t.Errorf("the test's thread lost its capabilities: %v", err)
	}
}
