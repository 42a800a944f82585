// Package ebpf is the kernel side of dal's boundary coverage
// (docs/design.md §8): it counts, in the kernel, the syscalls of each session's process tree by
// syscall and by nondeterminism category (clock, random, network,
// filesystem, process), and reports the rare notable crossings as events.
// It does not decide what a session captured or compute coverage; dald does,
// from Counts and Events.
//
// # What it observes
//
// Every syscall a tracked process enters, by number, named as strace names
// it (tables for amd64 and arm64 generated from golang.org/x/sys). Events:
//
//   - "connect": the destination of connect(2) — IPv4/IPv6 address and port,
//     or a Unix socket path ("unix:/path", "unix:@abstract"); and "sendto":
//     the destination of sendto(2) with an address, once per session and
//     destination (UDP streams do not flood the ring);
//   - "random_device": open, openat, openat2 of "/dev/random",
//     "/dev/urandom", "/proc/sys/kernel/random/uuid" or ".../boot_id" (the
//     path as passed, compared in the kernel);
//   - "exec": the file a counted process executed;
//   - "write_outside": with SetWorkspace, an open for writing of an absolute
//     path outside the workspace.
//
// # What it cannot observe
//
// Calls the vDSO serves never enter the kernel: clock_gettime,
// gettimeofday, time, getcpu and, on Linux ≥ 6.11 with a recent libc or Go,
// getrandom. They are not observable by syscall; count them from the
// runtime shims. Also out of sight: reads of memory the kernel shares
// (AT_RANDOM, vvar), relative paths and symlinks in the open checks (paths
// are taken as written), sendmsg/sendmmsg destinations, and 32-bit (ia32)
// processes, whose syscall numbers are counted under the 64-bit names.
// PIDs are those of the initial PID namespace: dald must run there.
//
// # Tracking
//
// Track(pid, session, n) makes pid and every process it forks from then on
// members of session; threads count with their process. With n = 0 the
// process counts at once. With n > 0 nothing is counted until the lineage
// has performed its n-th successful exec since Track (a fork inherits the
// execs still due); the execve or execveat that performs it is itself
// counted, so the counts equal `strace -f -c` of the command exec'd
// (strace lists neither exit nor exit_group, which never return; the
// tracer counts them). `dal-exec run` tracks its own pid with n = 1 (it
// never execs; the agent it forks counts from its exec); the sandboxed
// record path uses n = 2 (the child re-execs as sandbox init, which forks
// the agent). Track the process before it execs: learn its pid, Track,
// then let it exec. Only execs entered after Track count toward n: one
// under way at Track (entered before, reported by the kernel after) does
// not.
//
// A session id may be reused after Forget: the kernel knows each
// registration by a key of its own that is never reused while the tracer
// is open, so what a forgotten session leaves in flight (an event in the
// ring buffer, a process forked during Untrack) never reaches its
// successor.
//
// # Cost: attached only while a session is followed
//
// Open loads the programs but leaves them detached. The first Track
// attaches them; they stay attached while at least one session is followed
// (tracked and not yet untracked or forgotten) and are detached when the
// last one ends. With none, no dal program runs on any syscall, fork, exec
// or exit, and once no other program uses sys_enter the kernel takes its
// syscall fast path again: processes pay nothing (Attached reports the
// state). Attaching and detaching are serialized with Track, Untrack and
// Forget, so sessions may open and close concurrently.
//
// While attached, every syscall on the machine runs sys_enter. Its fast
// path serves a thread this CPU has already seen counting: a per-CPU cache
// keyed by the thread's register frame (sys_enter's first argument, which
// no two live threads share) holds the thread's session, and the syscall
// is counted in the session's per-CPU array with three inlined array
// lookups — no helper call, no hash lookup. On this project's 2-vCPU VM a
// counted syscall costs within a few percent of an empty program on the
// same hook (docs/benchmarks.md). Anything else (a process outside the
// sessions, a thread's first syscall, a syscall that sys_enter inspects)
// takes the slow path: one array lookup and a bit test for a process
// outside every session, the process map for a tracked one.
//
// The cache is invalidated by a generation number that moves when a
// thread of a tracked process exits (its stack, hence its register frame,
// may be the next new thread's, of any process), and when user space
// untracks or forgets a session or reattaches the programs.
//
// # Kernel side and map layout
//
// One BPF object (bpf/boundary.c, compiled by bpf2go for little-endian
// targets, committed) holds four programs on raw tracepoints: sys_enter,
// sched_process_fork, sched_process_exec and sched_process_exit. It holds
// no syscall numbers and no kernel struct layout: Open loads the per-number
// inspection table from Go and sets the offsets of task_struct.tgid,
// linux_binprm.filename and the pt_regs argument registers, read from the
// running kernel's BTF (/sys/kernel/btf/vmlinux), as read-only constants.
//
//   - tracked_pids (array, one bit per possible tgid, 512 KiB, mapped into
//     user space): a process outside every session costs, on the slow
//     path, one array lookup and a bit test.
//   - tasks (hash, tgid → session key, counters slot, execs still due,
//     exec syscall entered; up to MaxProcesses): looked up only when the
//     bit is set. Fork adds the child (entry, then bit), exit of the whole
//     thread group removes it (bit, then entry); Track and Untrack do the
//     same from user space with atomic operations.
//   - counters (array of maps, one slot per registered session; up to
//     MaxSessions) and slot_owner (slot → session key): each session has
//     a per-CPU array of its own, one counter per syscall number below
//     512 (numbers ≥ 511 share "syscall_other") and its dropped events,
//     created at its first Track or SetWorkspace and freed by Forget. The
//     count checks slot_owner, so a forgotten session's straggler never
//     counts for the slot's next owner; slots are reused as late as
//     possible.
//   - thread_cache (per-CPU array, 64 entries) and generation (one
//     counter, mapped into user space): the fast path above.
//   - sessions (hash, written by user space only: closed flag, workspace
//     prefix; up to MaxSessions), syscall_actions (array, number → what
//     sys_enter inspects), sent_to (LRU hash, sendto destinations already
//     reported), losses (per-CPU array: ring buffer drops, tasks-map-full),
//     events (ring buffer, Options.EventBufferBytes).
//
// Counters are plain increments: each is the CPU's own and the kernel runs
// these programs with preemption off (syscall tracepoints disable it
// around BPF programs), so no update is lost.
//
// Memory is bounded by Options, not by the workload. The maps take about
// 2.5 MiB at Open (bit array, ring buffer, hash buckets) and, for each
// registered session's counters, 4 KiB plus 4 KiB per CPU (12 KiB on 2
// CPUs). Forget frees the slot; its counters are kept for the next session
// (installing a map in counters, or removing one, makes the kernel wait
// for an RCU grace period, milliseconds), up to 16 idle ones, and the rest
// are removed in the background.
//
// Open needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF; when
// it cannot trace it returns an *UnavailableError whose message says, in
// one sentence, what is not observed and why.
package ebpf
