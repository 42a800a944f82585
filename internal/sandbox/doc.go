// Package sandbox runs an agent in its own mount and pid namespaces with its
// workspace on an overlay, and reads, exports, applies and reverts what the
// agent changed there. It is the filesystem half of DESIGN §6 (fs-diff/,
// fs-pre/) and §9 (revert); it knows nothing of bundles, signing or the CLI.
//
// # The sandbox
//
// [Command] returns an *exec.Cmd that re-executes the current binary
// (/proc/self/exe) with a hidden first argument in new mount and pid
// namespaces; [Init], the first statement of main, recognises it and becomes
// the sandbox's init (PID 1). The init
//
//   - makes every mount private, so nothing propagates to the host;
//   - mounts an overlay at the workspace path: the lower layer is the real
//     workspace (or [Config.Lower]), the upper layer and work directory live in
//     [Config.Staging]; the path inside is the path outside, so the agent's
//     cwd and the paths it prints are unchanged;
//   - makes the rest of the filesystem read-only (MOUNT_ATTR_RDONLY, recursive,
//     on /), mounts a private tmpfs on /tmp and /dev/shm, a fresh /proc for the
//     new pid namespace with /proc/sys and friends read-only, and binds
//     [Config.Binds] read-write at their own paths (cloned before /tmp is
//     covered, so a dald socket directory under the real /tmp stays reachable);
//     /dev is the host's, read-only as a mount, so device nodes work;
//   - makes itself non-dumpable (the agent cannot open /proc/1/fd), sets
//     no_new_privs, locks the securebits and drops every capability (bounding,
//     ambient, effective, permitted, inheritable) on the thread that forks the
//     agent, installs the write watcher below, and starts the agent in its own
//     process group (the terminal's foreground group when it had the
//     terminal);
//   - forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the agent's group, reaps
//     every zombie, and exits with the agent's status (128+n when it was killed
//     by signal n). Leaving PID 1 kills whatever the agent left running.
//
// The init dies with its parent (Pdeathsig), and the namespace with the init.
// A setup failure is written as one sentence on a pipe and the init exits 125
// without running the agent; [Ready] and [Wait] turn it into a *[SetupError].
//
// Preconditions: root in the initial user namespace with overlayfs and the
// new mount API (Linux 5.12 or later; "lowerdir+" is used from 6.8 and
// falls back to a joined lowerdir before). The staging directory must be on a
// filesystem that can hold an overlay upper layer (ext4, xfs, btrfs, tmpfs —
// not overlayfs) and must not overlap the workspace. Everything is built so
// that an unprivileged user could later add CLONE_NEWUSER with a uid map of
// itself; nothing here depends on being uid 0 beyond that.
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
// Limits: a prediction, not the errno — a call that fails earlier for
// another reason (a missing parent, ENOTDIR) is still listed; 32-bit and
// x32 syscalls are not watched; fd-based writes need an fd opened for
// writing, which a read-only mount never gives (inherited ones, such as
// stdout, are the caller's choice); each distinct (operation, path) is
// listed once, up to 10,000. Read-only opens are filtered in the kernel and
// cost nothing; each watched call costs one round trip to the init (a few
// microseconds). The eBPF issue can replace the watcher by a tracepoint on
// the failing calls.
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
