package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	dal "github.com/dal-runtime/dal"
)

// The init's image. [Command] starts the sandbox's init from
// dal-sandbox-init, a small binary installed beside dal-exec
// (cmd/dal-sandbox-init), when one is there and safe to run: the 35 MB
// dal-exec spends about 5 ms initialising packages the init never uses
// (policy, metrics, Markdown...), dal-sandbox-init well under one.
// Otherwise the init starts, as it always did, from dal-exec's own image
// (/proc/self/exe). Both run the same Init.
//
// Safe to run means dal-exec trusts it as much as itself: the file beside
// dal-exec's resolved path, reached without following a symbolic link, a
// regular file with the same owner as dal-exec, not set-user-ID or
// set-group-ID, executable by the caller, and writable by nobody who cannot
// write dal-exec (its group only when dal-exec's group may write dal-exec
// too, everyone only when everyone may write dal-exec). Anything else is
// ignored, never run.
//
// Same build: a dal-sandbox-init left by another build must never run the
// agent with other code. Each binary embeds the init's sources (the
// module's root package, initsources.go) and dal-exec hands its checksum
// to the init; an init whose own differs runs nothing and re-executes
// dal-exec's image from the descriptor dal-exec passed it (execveat), which
// keeps the init's credentials, ambient capabilities, parent-death signal
// and descriptors, and runs Init there as from /proc/self/exe.
//
// The protocol, which later builds keep: an init started from
// dal-sandbox-init has argv [initArg, spec, sum, fd], where sum is
// dal-exec's [dal.InitSum] and fd the descriptor of dal-exec's own image
// (opened O_PATH), fd+1 that of dal-sandbox-init. An init started from
// dal-exec's image has argv [initArg, spec].

// image is what [Command] starts the init from. The descriptors are
// opened once per process and never closed; the init gets copies.
type image struct {
	self    *os.File // dal-exec's own image, O_PATH; nil without sidecar
	sidecar *os.File // dal-sandbox-init beside it, O_PATH; nil: start from /proc/self/exe
	sum     string   // dal-exec's [dal.InitSum]
}

// initImage finds the image once per process.
var initImage = sync.OnceValue(func() image {
	self, sidecar, err := openBeside(initArg)
	if err != nil {
		return image{}
	}
	return image{self: self, sidecar: sidecar, sum: dal.InitSum()}
})

// openBeside opens, as paths (O_PATH), dal-exec's own image and the file
// name beside its resolved path when that is safe to run in its place (see
// the top of this file); otherwise it says why, naming the file.
func openBeside(name string) (self, beside *os.File, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find dal-exec's own path: %w", err)
	}
	if self, err = openPath("/proc/self/exe", 0); err != nil {
		return nil, nil, err
	}
	if beside, err = openSidecar(filepath.Join(filepath.Dir(exe), name), self); err != nil {
		self.Close()
		return nil, nil, err
	}
	return self, beside, nil
}

// ExecBeside executes the binary name beside dal-exec's resolved path in
// place of this process, with argv and env, when it is as safe to run as a
// dal-sandbox-init there; otherwise, or when the exec fails, it returns
// why, naming the file.
func ExecBeside(name string, argv, env []string) error {
	self, f, err := openBeside(name)
	if err != nil {
		return err
	}
	defer self.Close()
	defer f.Close()
	if err := execveat(int(f.Fd()), argv, env); err != nil {
		return fmt.Errorf("execute %s: %w", f.Name(), err)
	}
	return nil // not reached
}

// FindInit starts looking for the init's image (a dal-sandbox-init and its
// checksum, a few hundred microseconds) on another goroutine, so that a
// [Command] soon after finds it ready.
func FindInit() { go initImage() }

// openPath opens p as a path (O_PATH) with openat2's resolve flags.
func openPath(p string, resolve uint64) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openSidecar opens the dal-sandbox-init at p as a path (O_PATH) when it is
// safe to run in place of self, dal-exec's own image (see the comment at
// the top of this file), and says why not otherwise.
func openSidecar(p string, self *os.File) (*os.File, error) {
	var own unix.Stat_t
	if err := unix.Fstat(int(self.Fd()), &own); err != nil {
		return nil, fmt.Errorf("stat dal-exec: %w", err)
	}
	f, err := openPath(p, unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link or under one", p)
	}
	if err != nil {
		return nil, err
	}
	if err := checkSidecar(f, &own); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %w", p, err)
	}
	return f, nil
}

// checkSidecar checks the opened dal-sandbox-init f against own, dal-exec's
// stat; the error completes a sentence that names the file.
func checkSidecar(f *os.File, own *unix.Stat_t) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("cannot be read: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("is not a regular file")
	case st.Uid != own.Uid:
		return fmt.Errorf("is owned by uid %d, not by dal-exec's owner (uid %d)", st.Uid, own.Uid)
	case st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0:
		return errors.New("is set-user-ID or set-group-ID")
	case st.Mode&0o002 != 0 && own.Mode&0o002 == 0:
		return errors.New("is writable by everyone")
	case st.Mode&0o020 != 0 && (own.Mode&0o020 == 0 || st.Gid != own.Gid):
		return errors.New("is writable by a group that cannot write dal-exec")
	}
	if err := unix.Faccessat2(int(f.Fd()), "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil {
		return fmt.Errorf("cannot be executed: %w", err)
	}
	return nil
}

// useImage points c, whose init would start from /proc/self/exe, at the
// dal-sandbox-init of img, when it has one.
func (c *Cmd) useImage(img image) {
	if img.sidecar == nil {
		return
	}
	fd := 3 + len(c.ExtraFiles)
	c.ExtraFiles = append(c.ExtraFiles, img.self, img.sidecar) // fd, fd+1
	c.Path = "/proc/self/fd/" + strconv.Itoa(fd+1)
	c.Args = append(c.Args, img.sum, strconv.Itoa(fd))
}

// sameBuild runs first in an init started from dal-sandbox-init, with
// dal-exec's checksum sum and its image's descriptor fdArg (argv[2] and
// argv[3]): it returns when this image is of dal-exec's build, having
// closed both images' descriptors, and otherwise re-executes dal-exec's
// image as an init started from /proc/self/exe, never returning.
func sameBuild(sum, fdArg string) {
	fd, err := strconv.Atoi(fdArg)
	if err != nil || fd <= exitFD {
		initFailed("the sandbox was started with a malformed specification")
	}
	unix.CloseOnExec(fd)
	unix.CloseOnExec(fd + 1)
	if sum == dal.InitSum() {
		unix.Close(fd)
		unix.Close(fd + 1)
		return
	}
	err = execveat(fd, []string{initArg, os.Args[1]}, os.Environ())
	initFailed(fmt.Sprintf("the dal-sandbox-init beside dal-exec is of another build, and dal-exec's own init could not start (%v): reinstall both", err))
}

// nameInit names the init "exe" (its comm, which ps shows), as the kernel
// named it when it was started from /proc/self/exe: the agent sees the
// same whichever image its init started from.
func nameInit() {
	if f, err := os.OpenFile("/proc/self/comm", os.O_WRONLY, 0); err == nil {
		f.WriteString("exe")
		f.Close()
	}
}

// initFailed reports msg on the status pipe, as a setup error, and exits.
func initFailed(msg string) {
	fmt.Fprint(os.NewFile(statusFD, "status"), msg)
	os.Exit(setupExit)
}

// execveat executes the file open at fd (AT_EMPTY_PATH) and only returns
// on failure. It runs before the init starts anything: the runtime's own
// threads are the only others, and the exec ends them.
func execveat(fd int, argv, env []string) error {
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	empty := []byte{0}
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return errno
}
