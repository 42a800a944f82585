package ebpf

import "strconv"

// Category is a nondeterminism boundary a syscall crosses (docs/design.md §8).
type Category string

const (
	Clock      Category = "clock"
	Random     Category = "random"
	Network    Category = "network"
	Filesystem Category = "filesystem"
	Process    Category = "process"
)

// Categories lists every category, in report order.
var Categories = []Category{Clock, Random, Network, Filesystem, Process}

// CategoryOf returns the category of a syscall name, or "" when the syscall
// crosses none of them (read, write, mmap, futex, ...: I/O on a descriptor
// says nothing about what is behind it; the open, connect or pipe that made
// the descriptor does).
func CategoryOf(syscall string) Category { return categories[syscall] }

var categories = func() map[string]Category {
	m := map[string]Category{}
	add := func(c Category, names ...string) {
		for _, n := range names {
			m[n] = c
		}
	}
	add(Clock,
		"clock_gettime", "clock_getres", "gettimeofday", "time", "times",
		"clock_nanosleep", "nanosleep", "clock_settime", "settimeofday",
		"clock_adjtime", "adjtimex", "sysinfo", "alarm", "getitimer", "setitimer",
		"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
		"timerfd_create", "timerfd_settime", "timerfd_gettime")
	add(Random, "getrandom")
	add(Network,
		"socket", "socketpair", "connect", "accept", "accept4", "bind", "listen",
		"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
		"shutdown", "getsockname", "getpeername", "getsockopt", "setsockopt")
	add(Filesystem,
		"open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at",
		"stat", "lstat", "fstat", "newfstatat", "statx", "statfs", "fstatfs",
		"access", "faccessat", "faccessat2", "readlink", "readlinkat",
		"getdents", "getdents64", "getcwd", "chdir", "fchdir", "chroot",
		"mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
		"link", "linkat", "symlink", "symlinkat", "mknod", "mknodat",
		"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
		"truncate", "ftruncate", "utime", "utimes", "futimesat", "utimensat",
		"getxattr", "lgetxattr", "fgetxattr", "getxattrat", "listxattr", "llistxattr", "flistxattr", "listxattrat",
		"setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
		"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
		"fanotify_init", "fanotify_mark", "file_getattr", "file_setattr")
	add(Process,
		"fork", "vfork", "clone", "clone3", "execve", "execveat",
		"exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
		"getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid", "setsid", "setpgid",
		"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
		"uname", "sethostname", "setdomainname", "getcpu",
		"sched_getaffinity", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace")
	return m
}()

// Per-syscall actions of the kernel side (enum action in bpf/boundary.c):
// which syscalls sys_enter inspects beyond counting them.
const (
	actNone    = 0
	actConnect = 1
	actSendto  = 2
	actOpen    = 3
	actOpenat  = 4
	actOpenat2 = 5
	actCreat   = 6
	actExec    = 7
)

var actions = map[string]uint32{
	"connect":  actConnect,
	"sendto":   actSendto,
	"open":     actOpen,
	"openat":   actOpenat,
	"openat2":  actOpenat2,
	"creat":    actCreat,
	"execve":   actExec,
	"execveat": actExec,
}

// nrCounted is NR_COUNTED in bpf/boundary.c: numbers at or above
// nrCounted-1 are counted together in the last slot. A session's counters
// hold one more value after them, idxDrops (IDX_DROPS).
const (
	nrCounted = 512
	idxDrops  = nrCounted
)

// syscallTable is one architecture's number → name table.
type syscallTable []string

// name returns the strace name of a syscall number as the kernel side
// counted it.
func (t syscallTable) name(nr uint32) string {
	if nr == nrCounted-1 {
		return "syscall_other"
	}
	if int(nr) < len(t) && t[nr] != "" {
		return t[nr]
	}
	return "syscall_" + strconv.FormatUint(uint64(nr), 10)
}

// actions returns the kernel's per-number action table entries that are set.
func (t syscallTable) actions() map[uint32]uint32 {
	m := map[uint32]uint32{}
	for nr, name := range t {
		if a, ok := actions[name]; ok {
			m[uint32(nr)] = a
		}
	}
	return m
}
