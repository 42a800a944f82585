// Package safefs works on a directory tree that dal does not trust: a
// workspace an agent wrote to, the upper layer of its overlay, a bundle
// someone handed over, an extracted archive. It never follows a symlink
// there and never leaves the tree, whatever the tree holds and however it
// changes while dal works on it. Every file operation dal performs on such a
// tree goes through a [Dir]; nothing else opens paths under it.
//
// It is not a general file API: it knows nothing of overlays, bundles or
// changes, and it does not follow symlinks even where doing so would be
// harmless.
//
// # How the guarantees hold
//
// A [Dir] owns one O_PATH|O_DIRECTORY file descriptor on the root of the
// tree, opened once from a path the caller trusts (symlinks in that path
// are followed: it is the caller's choice of tree, not the tree's content).
// Every path given to a Dir is relative to that root, slash-separated and
// clean: no leading "/", no "." or ".." component, no empty component, no
// NUL byte (anything else is [ErrPath]). Names are bytes: a name that is
// not UTF-8 is an ordinary name here.
//
// A path is resolved in one of two ways, both relative to a descriptor and
// never to a string:
//
//   - openat2(2) from the root's descriptor with RESOLVE_BENEATH (no
//     component may leave the root), RESOLVE_NO_SYMLINKS (no symlink is
//     followed in any component, the last included: the call fails with
//     ELOOP, reported as [ErrSymlink]) and RESOLVE_NO_MAGICLINKS (no
//     /proc-style link); [OpenOneMount] adds RESOLVE_NO_XDEV (no mount
//     point is crossed) for trees that dal made itself. Files are opened
//     this way, and so is the parent directory of every other operation.
//   - An *at(2) call on that parent's descriptor with the last component
//     alone, and a flag or a call that never follows a symlink there:
//     fstatat and utimensat and fchownat with AT_SYMLINK_NOFOLLOW,
//     fchmodat2 with AT_SYMLINK_NOFOLLOW, mkdirat, mknodat, symlinkat,
//     readlinkat, unlinkat, renameat, linkat without AT_SYMLINK_FOLLOW,
//     and O_CREAT|O_EXCL (which fails on a symlink rather than following
//     it). Files are created O_CREAT|O_EXCL|O_NOFOLLOW and never truncated
//     before they are known to be regular files.
//
// Because every step holds a descriptor, a rename of a parent between two
// steps cannot redirect a later step: the descriptor names the directory
// that was resolved beneath the root, wherever it is moved. A concurrent
// writer can still move that directory out of the tree after it was
// resolved; the operation then happens in that directory, which it could
// have written itself, and never in a place the writer chose by a link.
// [Dir.RemoveAll] descends with openat(O_NOFOLLOW|O_DIRECTORY) one name at
// a time and removes with unlinkat on the directory's own descriptor, so it
// never descends through a symlink.
//
// Opening for reading uses O_NONBLOCK and refuses anything but a regular
// file or a directory, so a fifo planted where a file was expected cannot
// stall dal and a device node is never read. Extended attributes are read
// and written through a descriptor of the file or directory itself
// (fgetxattr, fsetxattr), never by path.
//
// # Preconditions and cost
//
// openat2 appeared in Linux 5.6; without it [Open] fails with [ErrOpenat2]
// and nothing is done. fchmodat2 (Linux 6.6) is used when present; before
// it, a mode is set through /proc/self/fd of an O_PATH descriptor that was
// resolved without following symlinks. Raw system calls come from
// golang.org/x/sys/unix; there is no cgo.
//
// Each operation on a path below the root's own entries costs one openat2
// of the parent and a close on top of the operation itself; the kernel's
// path walk is the same as for a plain path.
package safefs
