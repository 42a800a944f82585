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
//   - "random_device": open, openat, openat2 of "/dev/random" or
//     "/dev/urandom" (the path as passed, compared in the kernel);
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
//     user space): the fast path. A process outside every session costs
//     one array lookup and a bit test, and returns.
//   - tasks (hash, tgid → session key, execs still due, exec syscall
//     entered; up to MaxProcesses): looked up only when the bit is set.
//     Fork adds the child (entry, then bit), exit of the whole thread group
//     removes it (bit, then entry); Track and Untrack do the same from user
//     space with atomic operations.
//   - counts (per-CPU hash, {session key, syscall number} → count; up to
//     MaxCounters): counted with an atomic add on the CPU's own slot.
//     Numbers ≥ 1023 share the "syscall_other" slot.
//   - sessions (hash, written by user space only: closed flag, workspace
//     prefix) and session_marks (hash, written by the kernel only: which
//     syscall numbers have a counter — so Counts and Forget touch only
//     those — and the session's dropped events); up to MaxSessions.
//   - syscall_actions (array, number → what sys_enter inspects),
//     sent_to (LRU hash, sendto destinations already reported),
//     losses (per-CPU array: ring buffer drops, counters-map-full,
//     tasks-map-full), events (ring buffer, Options.EventBufferBytes).
//
// Memory is bounded by Options, not by the workload. The hashes allocate
// entries as they are used: with the defaults the maps take 3.5 MiB at
// Open (bit array, ring buffer, hash buckets) and about 3.3 KiB more per
// session that ran a small command (~30 distinct syscalls, on 2 CPUs; a
// counter's per-CPU part grows with the CPU count). Forget gives a
// session's memory back.
//
// Open needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF; when
// it cannot trace it returns an *UnavailableError whose message says, in
// one sentence, what is not observed and why.
package ebpf
