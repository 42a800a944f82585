package sandbox

// # Containment of the file steps (issue 12)
//
// Every step that reads or writes a tree the agent or a bundle controls —
// the upper layer ([Capture], [Place]), the lower view and the workspace
// ([Export], [AtPre], [AtPost], [Apply], [Revert], [Restore], [TreeHash]),
// the fs-diff/fs-pre mirrors of a bundle, the replay layer — goes through
// internal/safefs: paths are resolved beneath a directory descriptor with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), new
// entries are created O_EXCL|O_NOFOLLOW or with *at calls that do not
// follow, and nothing in this package opens such a path by name. A symlink
// is content: it is captured, copied and restored as a symlink, and never
// passed through.
//
//   - [Place] writes under a fresh random name beside the target
//     (".<name>.dal-place-<hex>", O_EXCL) and renames it over the target;
//     whatever the agent left (a symlink named like the old temp file, a
//     symlink at the target or a parent) is replaced or left alone, never
//     followed.
//   - [AtPre] and [AtPost] also require every parent of a changed path that
//     is not itself a change to be a directory (a symlink there is a
//     [StateError]), so Apply and Revert refuse before they write anything.
//     [Validate] refuses a list whose pre-run or post-run state puts an
//     entry below a file or a symlink of the same state: Revert could
//     otherwise restore a symlink and write through it.
//   - A copy in a mirror that is not of the recorded kind (a symlink where a
//     file is recorded) is "missing"; it is never read through.
//
// # What Apply does not apply
//
// [Capture] takes setuid and setgid off the files the run created or
// modified, and notes them and file capabilities (the security.capability
// xattr) in [Change.Stripped] ("setuid", "setgid", "capability"); Mode is
// the mode without them. [Export] copies such a file into fs-diff instead
// of linking it, so the bundle holds neither the bits nor the xattr. Apply
// never sets setuid or setgid on a file, whatever a list says, and never
// copies xattrs; a directory's setgid (group inheritance) is kept. What
// Apply and Revert create belongs to the real uid and gid of the process
// (the user who ran dal-exec), never to the owner the entry had in the
// capture layer; a file rewritten in place keeps its owner. A file with
// other hard links is replaced rather than rewritten, so the other names
// keep their content.
//
// # Names and special files
//
// Paths, symlink targets and renamed_from are bytes. In changes.json a
// value that is not UTF-8 is written as text with each stray byte as "%XX"
// and, beside it, "<field>_b64": the standard base64 of the bytes, which
// is what is read back. A reader accepts a *_b64 field only for a name that
// is not UTF-8 and whose text form matches, and validates the decoded path
// like any other (no traversal through an encoding). [CaptureAll] lists
// the fifos, sockets and device nodes the run left as [Uncaptured]; they
// are not exported or applied.
//
// # Crash-safe apply
//
// Apply and Revert write a journal before they touch the workspace
// (<parent>/.<name>.dal-journal, else $XDG_STATE_HOME/dal/journals/) with
// the operation, the copies it uses and the change list, hold an flock on
// it while they work, and remove it when the workspace is at its new state.
// When a step fails they undo what was done from the other side's copies
// (fs-pre beside fs-diff, and the reverse) and say which state the
// workspace is at. After a kill -9, [Recover] — called first by the next
// Apply, Revert or Restore of that workspace — completes the operation, or
// rolls it back when its copies are gone, or, when neither is possible,
// says so and keeps the journal.
