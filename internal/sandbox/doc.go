// Package sandbox runs an agent in its own mount, pid, IPC and UTS (and,
// on request, network) namespaces with its workspace on an overlay, and
// reads, exports, applies and reverts what the agent changed there. It is
// the filesystem half of docs/design.md §6 (fs-diff/, fs-pre/) and §9 (revert) and
// the containment of §12; it knows nothing of bundles, signing or the CLI.
//
// # The sandbox
//
// [Command] returns a [Cmd], an *exec.Cmd that re-executes the current
// binary (/proc/self/exe), or the smaller dal-sandbox-init installed beside
// it (image.go), with a hidden first argument in new mount, pid, IPC and
// UTS namespaces, together with the descriptors dal-exec keeps to
// talk to it (a status pipe, the gate, the policy channel); [Init], the
// first statement of main, recognises it and becomes the sandbox's init
// (PID 1). The Cmd owns those descriptors: [Cmd.Wait] or [Cmd.Close]
// releases them. The init
//
//   - makes every mount private, so nothing propagates to the host;
//   - mounts an overlay at the workspace path: the lower layer is the real
//     workspace (or [Config.Lower]), the upper layer and work directory live in
//     [Config.Staging]; the path inside is the path outside, so the agent's
//     cwd and the paths it prints are unchanged;
//   - makes the rest of the filesystem read-only and nodev
//     (MOUNT_ATTR_RDONLY|MOUNT_ATTR_NODEV, recursive, on /): a device node
//     anywhere on the host's tree, or planted in the workspace (nosuid and
//     nodev too), opens nothing;
//   - mounts a private tmpfs on /tmp, /var/tmp, /run and /var/run
//     ([Config.PrivateTmp]) and a fresh /proc for the new pid namespace with
//     /proc/sys and friends read-only (with virtual randomness its
//     kernel/random/uuid and boot_id come from the seed, procrandom.go),
//     and masks the host's other Unix sockets (unixsock.go);
//   - gives the sandbox a /dev of its own, as runc does: a read-only tmpfs
//     holding the host's null, zero, full, random, urandom and tty nodes
//     (each a bind of the node alone, read-only as a mount so the agent,
//     uid 0, cannot chmod the host's), a private devpts instance
//     (newinstance, ptmxmode=0666) with /dev/ptmx a link to pts/ptmx, a
//     private tmpfs on /dev/shm, and the fd, stdin, stdout and stderr links.
//     No block device, no other character device (mem, kmsg, loop-control,
//     kvm, the host's ptys and consoles); without CAP_MKNOD the agent
//     makes none;
//   - covers [Config.Hidden] (the caller's home and /root) with an empty,
//     read-only tmpfs, shows through it only what [Config.HideHome] lists,
//     and covers [Config.Secrets] (dal's signing key) last (home.go);
//   - binds [Config.Binds] read-only at their own paths, and only
//     [Config.WritableBinds] read-write (cloned before /tmp is covered, so a
//     path under the real /tmp stays reachable; nosuid, nodev), and each of
//     [Config.Sockets] as the socket file alone, never its directory: under
//     the private /tmp an empty file is made to mount it on;
//   - sets the host name to "dal" in its UTS namespace; SysV IPC objects and
//     POSIX message queues the agent creates live in its IPC namespace and
//     die with it (POSIX shared memory lives in the private /dev/shm);
//   - makes itself non-dumpable (the agent cannot open /proc/1/fd), sets
//     no_new_privs, locks the securebits and drops every capability (bounding,
//     ambient, effective, permitted, inheritable) on the thread that forks the
//     agent, refuses the kernel keyrings and AF_VSOCK (keyring.go),
//     installs the write watcher below, and starts the agent as the
//     leader of a new session (setsid), so the caller's terminal is never its
//     controlling terminal;
//   - forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the agent's group, reaps
//     every zombie, and exits with the agent's status (128+n when it was killed
//     by signal n). Leaving PID 1 kills whatever the agent left running.
//
// The init dies with its parent (Pdeathsig), and the namespace with the init.
// A setup failure is written as one sentence on a pipe and the init exits 125
// without running the agent; [Cmd.Ready] and [Cmd.Wait] turn it into a
// *[SetupError].
//
// Preconditions: overlayfs and the new mount API (Linux 5.12 or later;
// "lowerdir+" is used from 6.8 and falls back to a joined lowerdir before;
// PIDFD_THREAD from 6.9 for the connect report, else a thread other than a
// group leader is not reported). The staging directory must be on a
// filesystem that can hold an overlay upper layer (ext4, xfs, btrfs, tmpfs
// — not overlayfs) and must not overlap the workspace.
//
// # Rootless
//
// As root, the init runs in dal-exec's user namespace and the agent as uid
// 0 without capabilities. When dal-exec is not root, [Command] adds a user
// namespace in which the caller's uid and gid are mapped to themselves
// (one id each; setgroups denied), and the init keeps the namespace's
// capabilities across its exec as ambient ones, so it builds the same
// sandbox and the agent, which drops them, runs as the caller: the
// overlay (mounted with userxattr, whose opaque marks are user.overlay.*
// xattrs), the read-only host tree, /proc, /dev, the network namespace,
// the seccomp watcher and the syscall layer all work alike. Files the agent writes belong to the caller; host files of other
// users show as nobody. Listeners in the sandbox's network namespace are
// opened by the init and passed back over the gate (gate.go), since an
// unprivileged dal-exec cannot enter that namespace. A kernel that
// forbids unprivileged user namespaces is named with the setting to
// change before anything starts (rootless.go). What needs root on the
// host stays root's: eBPF tracing (the caller says so), restoring other
// users' ownership on apply.
//
// # The terminal
//
// When one of the init's fds 0, 1 and 2 is a terminal (the caller's), the
// init allocates a pty in the sandbox's devpts, gives it the caller's modes
// and window size, and hands the agent the pty in place of every
// descriptor that was the caller's terminal; the pty is the agent's
// controlling terminal. The agent never holds a descriptor of the caller's
// terminal, so it cannot push input into it (TIOCSTI), read it behind the
// user's back or change its modes; TIOCSTI and TIOCLINUX are refused by the
// filter below in any case. The init relays: when stdin is a terminal and
// the init's group is in its foreground, it puts it in raw mode (output
// processing stays on unless stdout and stderr are the terminal too, since
// dal-exec prints the agent's piped output there) and copies keystrokes to
// the pty, whose line discipline echoes and edits and turns ^C into SIGINT
// for the agent's foreground job; it copies the pty's output to the
// caller's terminal, and the window size on each SIGWINCH. When the agent
// exits, the init kills what it left (which holds the pty), drains the
// pty's output and restores the caller's modes. The relay's threads block
// SIGTTIN and SIGTTOU: as a PID namespace's init it cannot be stopped by
// them, so in the background a read fails and the relay waits for SIGCONT.
// If dal-exec is killed with SIGKILL, the caller's terminal stays raw
// (`reset` restores it), as with ssh.
//
// # Denied writes
//
// The read-only mounts are what make writes fail (EROFS); reporting them is
// a seccomp user-notification filter installed on the agent. The filter
// traps only write-intent calls: open/openat with O_WRONLY, O_RDWR, O_CREAT
// or O_TRUNC, every openat2 and creat, and mkdir, mknod, unlink, rmdir,
// rename, link, symlink, truncate, chmod, chown, utime* and *setxattr/
// *removexattr by path. The init reads the path from the agent's memory,
// resolves it against the agent's cwd or dirfd and its parent's symlinks,
// and when the mount under it is read-only (and it is not a device, fifo or
// socket) and not under [Config.Quiet], appends it to Staging/denied.jsonl;
// then it lets the call continue (SECCOMP_USER_NOTIF_FLAG_CONTINUE), so
// the kernel, not the watcher, decides. [Denied] reads the list. fanotify
// cannot do this: the kernel refuses such a call before any fsnotify event.
// io_uring_setup is refused (EPERM) and listed with an empty path: a ring's
// writes are made by the kernel, past the watcher; io_uring_enter and
// io_uring_register, and the ioctls TIOCSTI and TIOCLINUX, fail with EPERM
// in the filter itself, also through the 32-bit ABI (int 0x80).
// Limits: a prediction, not the errno — a call that fails earlier for
// another reason (a missing parent, ENOTDIR) is still listed; 32-bit and
// x32 syscalls are not watched (a kernel with x32 would also let io_uring
// through it; distributions build without); fd-based writes need an fd opened for
// writing, which a read-only mount never gives (inherited ones, such as
// stdout, are the caller's choice); each distinct (operation, path) is
// listed once, up to 10,000. Read-only opens are filtered in the kernel and
// cost nothing; each watched call costs one round trip to the init (a few
// microseconds). The eBPF issue can replace the watcher by a tracepoint on
// the failing calls.
//
// With [Config.Network], connect is watched too: an attempt on an IPv4 or
// IPv6 socket (asked of the socket itself through pidfd_getfd) to an
// address off loopback is listed by [Blocked]; it fails, the namespace
// having no route out. Unix-socket connects are not listed: they reach
// what the sandbox shows, and may succeed. The address is read from the
// agent's memory before the kernel reads it, so an agent racing its own
// threads can make the list name another address than the one it reached.
//
// # Capture, export, apply, revert
//
// [Capture] compares the upper layer with the lower view after the run: a
// whiteout is a deletion (with every entry below a deleted directory listed),
// an opaque directory deletes the lower entries it does not hold again, a
// copied-up entry is "modified" only when its kind, permission bits or
// content differ (a touch or a rewrite with the same bytes is no change;
// times, owners and xattrs are not compared). Directory renames are not
// redirected (redirect_dir=off): rename(2) of a directory that exists in the
// lower layer fails with EXDEV, and tools fall back to copy and delete, as in
// Docker's overlay2. A renamed file is a deletion plus a creation; when the
// created file's content hash matches exactly one deleted file's,
// [Change.RenamedFrom] names it. Hard links are captured as separate files;
// fifos, sockets and device nodes are ignored everywhere (also by
// [TreeHash]).
//
// [Export] writes diffDir/changes.json (the []Change, sorted) and
// diffDir/files/ (a mirror of created and modified files, symlinks and
// directories with their modes and mtimes) and preDir/files/ (pre-images of
// modified and deleted entries from the untouched lower view). [Apply],
// [Revert] and [Restore] take it from there; [ReadChanges] validates a list
// read back from a bundle. Apply and Revert first check that the workspace is
// exactly at the pre-run (resp. post-run) state on every changed path
// ([AtPre], [AtPost]; a directory the run created must hold nothing else)
// and refuse, naming the first path, when it is not. They then remove
// entries deepest first and put the others parents first: an existing
// regular file is rewritten in place (it keeps its inode, as when a program
// edits it; on ext4 this is ten times faster than creating a file), other
// entries are created; every copy is checked against its recorded hash,
// and modes, owners (as root) and mtimes are restored. A crash part-way
// leaves a mix, which a second attempt refuses, naming the first path that
// is at neither state.
//
// [Restore] prepares a replay without touching the workspace: at the
// pre-run state it has nothing to do; at the post-run state it writes an
// overlay layer (whiteouts for created paths, pre-images for the rest) to
// stack over the workspace with [Config.Lower], so the replayed agent sees
// the pre-run tree at the same path at the cost of the changed files only.
// [TreeHash] and [TreeHashLayers] hash a tree or a merged stack of layers.
//
// # Notes
//
// PIDs inside the namespace are not small: the init's own threads take the
// first ones, so the agent's pid is around 10; its parent is 1.
package sandbox
