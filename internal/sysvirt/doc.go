// Package sysvirt is dal's syscall layer: it gives every process of a
// sandboxed agent — whatever its language or linkage, shimmed or not — the
// virtual clock and seeded randomness of its own stream, without code
// changes and without a ptrace stop per system call.
//
// # Mechanism
//
// The sandbox's init traces the agent's process tree with ptrace, stopping
// each task only at exec, fork, vfork and clone (PTRACE_O_TRACEEXEC and
// friends), never per system call. At every exec it edits the new image's
// auxiliary vector before the image's first instruction runs:
//
//   - AT_SYSINFO_EHDR becomes AT_IGNORE, so the C library (glibc, musl) and
//     the Go runtime find no vDSO and make real clock_gettime, gettimeofday,
//     time and getrandom system calls;
//   - the 16 AT_RANDOM bytes (glibc's stack canary and pointer guard, Go's
//     runtime seed and so its map order) are replaced by bytes of the
//     process's stream.
//
// Those calls, and the sleeps and timed waits, reach the seccomp filter the
// init installed, which hands them to the supervisor (seccomp user
// notification). The supervisor answers from the process's stream and
// writes results into the caller's memory (process_vm_writev); everything
// else runs at the cost of the filter alone.
//
// # Streams
//
// A process's stream is named by spawn order under its parent, as the shims
// name theirs: the agent is "0", its first child "0.1". Threads share their
// process's stream. A shimmed runtime keeps its own in-process clock for
// what it serves itself (time.time, Date.now); its C-level reads and its
// children's come from here.
//
// # Time (strict mode)
//
// A stream's clock is an offset t = base + reads×quantum (ns). A read of a
// realtime clock (CLOCK_REALTIME, _COARSE, _ALARM, CLOCK_TAI, gettimeofday,
// time) counts one read and returns epoch+t; a monotonic one
// (CLOCK_MONOTONIC, _RAW, _COARSE, CLOCK_BOOTTIME, _ALARM) returns mono+t.
// Per-process CPU-time clocks stay real: they measure work, not time, and
// are counted as such. Sleeps, expired waits and waited-for children move
// base.
//
// A new process starts at its parent's base, not its reads: its values never
// depend on how often its parent looked at the clock (a shimmed runtime's
// own bookkeeping does, and varies from run to run). When a process ends
// while its parent is waiting for it (every thread of the parent blocked,
// checked at the exit's first step, before the child's descriptors close),
// the parent's base moves up to the child's: `date; sleep 2; date` in a
// shell shows two seconds pass. A parent busy meanwhile keeps its time.
//
// A sleep (nanosleep, clock_nanosleep) of a single-threaded process adds its
// duration to t and returns at once. In a multi-threaded process a sleep is
// real and does not move t: runtimes sleep on helper threads (Go's sysmon
// polls every 20 µs–10 ms), and letting those sleeps move the clock would
// make every read depend on how often they ran.
//
// A wait with a timeout (poll, ppoll, select, pselect6, epoll_wait,
// epoll_pwait, epoll_pwait2) follows the shims' outstanding-I/O rule. What is
// ready is returned at once and t does not move. Otherwise, when none of the
// waited descriptors is outstanding I/O (a connected socket, a pipe, a
// terminal, a signalfd, a timerfd, an inotify or nested epoll descriptor;
// listening sockets and eventfds are not) and no other thread of the
// process is running (a thread held for a clock read or getrandom counts
// as running), t jumps by the timeout and the call times out at once;
// otherwise the wait is real, for at most the timeout, looking again every
// 2 ms, and t jumps by the timeout when it expires or as soon as the
// condition holds. The second half matters to Go: its netpoller waits with
// the next timer's deadline while another thread registers a socket it is
// connecting, and jumping then would time the dial out. A wait that sets a
// signal mask (ppoll, pselect6, epoll_pwait with a mask) runs as the kernel
// would, in real time, and is counted as such: dal cannot apply the mask for
// it.
//
// Absolute deadlines a program computed from its virtual clock
// (FUTEX_WAIT_BITSET, FUTEX_LOCK_PI, futex_waitv, clock_nanosleep with
// TIMER_ABSTIME in a multi-threaded process) are translated into the real
// clock before the kernel sees them, so a condition variable's 5 s timeout
// waits 5 s, not months (the virtual epoch is in the past) or never.
//
// # Randomness
//
// getrandom draws from the process's stream, label "<stream>/getrandom";
// AT_RANDOM from "<stream>/at_random.<k>" for the k-th image the process
// runs. The sandbox's /dev/urandom and /dev/random are FIFOs the init keeps
// full of stream (seed, "dev/urandom") and (seed, "dev/random"): readers
// share each stream in the order they read it, so a script's or a
// pipeline's reads repeat; concurrent readers split it as the scheduler
// decides, and fstat shows a FIFO.
//
// # Addresses and pids
//
// The agent's tree runs without address-space randomization (bash seeds
// $RANDOM with a stack address; runtimes order objects by address). The
// agent is pid 100 in its pid namespace (ns_last_pid, set before it starts)
// and the init keeps 16 idle threads warm so its own thread starts take no
// pids in the middle of the tree: pids repeat when the tree starts its
// processes in the same order, which a sequential script does. Threads take
// pids too, so a multi-threaded program's children's pids vary with its
// thread starts.
//
// # Limits, measured where they apply
//
//   - File times (mtime, ctime, atime, btime) and inode numbers are real.
//   - Timers on the real clock (timerfd, timer_create, setitimer, alarm)
//     fire in real time; absolute timerfd deadlines are not translated.
//   - A sleep in a multi-threaded process is real (see above), so Go's
//     time.Sleep — a timer on the netpoller, an epoll wait — jumps only
//     when no descriptor of the poller is outstanding I/O.
//   - Values in a multi-threaded process depend on the order its threads
//     read the clock, which the scheduler decides.
//   - ptrace: a program in the sandbox cannot trace another (strace, gdb):
//     dal is the tracer. A group stop (SIGSTOP, SIGTSTP) does not stop.
//   - dal-exec run has no sandbox and so no syscall layer.
//
// # Counts
//
// The supervisor counts what it served and what it let through per
// category; [Counts] are written where the sandbox's caller reads them, so
// coverage reports what was served, never what was merely possible.
package sysvirt
