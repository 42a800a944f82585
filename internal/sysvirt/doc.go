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
//   - in strict mode AT_SYSINFO_EHDR points at dal's own vDSO (below),
//     which serves clock reads and getrandom inside the process; in seeded
//     mode (and in strict mode with [Config].NoVDSO, or when mapping it
//     fails, which is noted) AT_SYSINFO_EHDR becomes AT_IGNORE, so the C
//     library (glibc, musl) and the Go runtime find no vDSO and make real
//     clock_gettime, gettimeofday, time and getrandom system calls;
//   - the 16 AT_RANDOM bytes (glibc's stack canary and pointer guard, Go's
//     runtime seed and so its map order) are replaced by bytes of the
//     process's stream.
//
// System calls for the clock and randomness, the sleeps and timed waits,
// the timer calls (strict mode: setitimer, getitimer, alarm,
// timer_settime, timer_gettime, timer_delete, timerfd_settime,
// timerfd_gettime, rt_sigtimedwait), and sysinfo, times, adjtimex and
// clock_adjtime(CLOCK_REALTIME) (strict mode) reach the seccomp filter the init
// installed, which hands them to the supervisor (seccomp user
// notification). The supervisor answers from the process's stream and
// writes results into the caller's memory (process_vm_writev); everything
// else runs at the cost of the filter alone. Each call served is one row
// of table.go (number, name, filter rule, handler, category): the
// filter's rules and their BPF ([Rules], [Filter]), [Supervisor.Handle]'s
// dispatch and the names counted in [Counts] are derived from it.
//
// # dal's vDSO (strict mode)
//
// Package vdso holds a 2.6 KB freestanding shared object, built from C by
// go generate and committed, that exports what the kernel's x86-64 vDSO
// does — __vdso_clock_gettime, __vdso_gettimeofday, __vdso_time,
// __vdso_clock_getres, __vdso_getcpu (and the unprefixed aliases) — and
// __vdso_getrandom, all versioned LINUX_2.6, with DT_HASH and DT_GNU_HASH:
// glibc (dynamic and -static) and the Go runtime, which parses the vDSO
// itself, take it for the kernel's (tested). musl's loader, which needs
// DT_HASH, should too; there is no musl here to test it with.
//
// At the exec stop the supervisor maps three data pages and the image into
// the stopped task: it injects mmap (anonymous, private) and mprotect (the
// image read-only and executable), single-stepping the kernel vDSO's own
// syscall instruction, so no byte of the program changes; it writes the
// pages with process_vm_writev and points AT_SYSINFO_EHDR at the image.
// The pages are the process's memory: its threads share them, a fork
// copies them (the supervisor resets the child's before it runs: its
// parent's base, no reads, empty random buffers) and an exec gets new ones.
//
// A clock read in the vDSO loads off = base + (reads the supervisor
// served)×quantum, under a one-byte sequence count the supervisor makes
// odd while it rewrites off, then adds one to the pages' read counter r
// atomically and returns epoch or mono + off + r×quantum: the value the
// supervisor's own formula gives, with the process's threads sharing one
// stream. Clocks it does not serve (CPU time, unknown ids), clock_getres
// and getcpu make the real call. The supervisor rewrites off when base
// moves (sleeps, expired waits, a waited-for child's exit) and when it
// serves a clock system call itself (a program calling syscall(2)
// directly), reading r to answer.
//
// One thread of a Go program reads without moving the clock: the runtime's
// monitor (sysmon), the first thread a Go image creates (its ELF file has a
// .go.buildinfo section), which wakes on the real clock and reads the
// monotonic clock at each wake-up. Its reads see the value the program's
// last read left (the data pages name it by its FS base, which the vDSO
// reads with rdfsbase where HWCAP2_FSGSBASE allows; its clock system calls
// get no quantum); they are not counted as served. Before, a program's own
// time.Now moved by how often sysmon had run: 12–56 µs over a 100 ms loop
// and 0–3 µs over a sleep, run to run; now 1 µs, every run (quiet.go).
// Preemption runs on that clock too, so a goroutine that computes without
// reading the clock is not preempted: two goroutines racing through 50 ms
// of work each finish one after the other, every run (natively with one
// processor they interleave differently each time). A goroutine spinning
// on another's flag would then spin forever: when the program read no
// clock for a second of real time while sysmon kept waking, the clock
// moves 10 ms (Go's preemption interval) and the move is a clock escape,
// with a note saying why.
// The agent's tree runs under SCHED_BATCH (internal/sandbox's batch.go),
// which keeps the Go runtime's thread hand-offs, and so its per-thread
// random seeds (map order, math/rand/v2), in program order.
//
// getrandom takes bytes from one of two 4 KiB buffers of the process's
// getrandom stream with an atomic add; when the buffer has run out it makes
// the real call, which the supervisor serves from the stream before
// filling the other buffer and switching to it. The buffers start empty,
// so a program that never calls the vDSO's getrandom draws the stream as
// before. Go 1.24+ (crypto/rand) and glibc 2.41+ call it; glibc 2.36, the
// C library here, makes the getrandom system call itself, which stays a
// round trip to the supervisor.
//
// Cost, measured on a shared 2-CPU VM (BenchmarkVirtClockRead and
// BenchmarkVirtGetrandom16 in package sandbox: a C loop, start-up
// subtracted, min–max of 3 runs):
//
//   - clock_gettime(CLOCK_REALTIME): 13–48 ns through dal's vDSO, against
//     12.6–16.8 µs through the supervisor (NoVDSO), 27–29 ns native and
//     62–70 ns under libfaketime. It beats the kernel's vDSO: no TSC read.
//   - getrandom(16) from C: 10.1–10.7 µs either way (NoVDSO 10.3–10.6
//     µs), against 0.4 µs native (it was 10–18 µs before the listener
//     asked the kernel to wake the supervisor on the caller's CPU,
//     SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6; older kernels answer
//     as before): glibc 2.36 makes the system call, a seccomp round trip
//     (whose floor here is 4.5 µs with both ends on one CPU). Issue 14's 2 µs is met
//     only where the C library calls the vDSO (glibc 2.41+).
//   - In a Go program (CGO_ENABLED=0, 200,000 calls, wall time of a strict
//     record less a run of none): time.Now about 30 ns against 19.3 µs,
//     crypto/rand.Read of 16 bytes about 0.2 µs against 9.9 µs. A channel
//     ping-pong of 1,000,000 round trips runs 0.84–1.09x `dal-exec run`
//     under record (21.7x before dal's vDSO): it makes no timed wait at
//     all (none counted in a million round trips; sysmon's 76 sleeps), so
//     waits are not its cost (BenchmarkGoroutineHeavyUnderTheLayer in
//     e2e; at 100,000 round trips, 34 ms of work, its 1.96x was a strict
//     record's start-up noise, ±30 ms).
//   - A timed wait that is ready at once (a Python loop of poll() on a
//     readable socketpair, 20,000 calls against 10, CPU time of the whole
//     tree, median of 5): 16.5 µs against 1.0 µs native and 21.9 µs
//     before the waits kept their pidfd. The seccomp round trip alone (a
//     build that lets every wait through unlooked-at) is 13.5 µs, so the
//     look — reading the poll array, one pidfd_getfd, poll and close per
//     descriptor, about 1.7 µs a system call here — is the last 3 µs.
//   - A call the layer does not handle (getppid): 1.04–1.96x native, the
//     filter's cost, as before. The timer rules (9, 4 instructions each)
//     put getppid at 240–260 ns against 204–224 ns before them in
//     alternating runs (1.06–1.18x native against 1.04–1.17x): within the
//     run-to-run noise of this shared machine.
//   - A timer call the supervisor answers (BenchmarkVirtTimerSettime and
//     BenchmarkVirtTimerGettime, 20,000 calls, 2 runs): timer_settime
//     15.8–16.0 µs, timer_gettime 15.0–15.8 µs, against 0.37–0.50 and
//     0.42–0.45 µs in a sandbox without the layer: the seccomp round trip.
//     An untimed epoll_wait that is ready at once stays at the filter's
//     cost (BenchmarkVirtUntimedWaitReady: 0.43–0.54 µs against 0.45–0.52
//     µs; 8–9 µs in a draft that handed untimed waits over).
//   - `timeout 5 sleep 10` and `timeout 5 sleep 1` (coreutils), twice
//     each in two strict runs: 0.06–0.21 s of wall time in all, against
//     12 s native.
//   - A stat of a file the run made (BenchmarkStatUnderTheLayer in e2e, a
//     C loop of 20,000, best of 3, 3 runs): 28.1–28.3 µs for a relative
//     path, 23.1–23.4 µs for an absolute one, 21.1–21.9 µs for fstat,
//     against 1.1, 1.3 and 0.6 µs native: the seccomp round trip (13.5
//     µs) and the caller's resolution done again — read the path, open the
//     caller's working directory through /proc (5 µs), openat2, statx,
//     close, write the answer. The first draft (a /proc check of the
//     caller's root and namespace at every call) took 36.5, 31.9 and 27.4
//     µs in the same run. Walking without capabilities (callercaps.go: two
//     capset calls around a path's walk) added about 3 µs to a path stat;
//     the notification loop's own thread now drops the capabilities a
//     walk could use for good, and needs none. A name in a directory
//     descriptor (find, ls) is one statx that follows no link, not
//     openat2's walk. The supervisor's work per stat, thread CPU time
//     (BenchmarkStatWork, no round trip): a name in a directory descriptor
//     3.0–3.5 µs (5.5–6.1 before), an absolute path 2.3–2.5 (3.9–6.9), a
//     name in the working directory 5.5 (8.6–9.8: opening
//     /proc/<tid>/cwd), fstat 1.7. The rest of a served stat is the round
//     trip: two context switches, which is where perf puts most of a
//     strict find's time (docs/design.md §3.2).
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
// terminal, a signalfd, an inotify or nested epoll descriptor; listening
// sockets, eventfds and timerfds, whose expiries are dal's, are not) and
// no other thread of the process is running (a thread held for a clock
// read or getrandom counts as running), t jumps by the timeout (or to the
// first timer that ends the wait, below) and the call returns at once;
// otherwise the wait is held in real time, looking again every 2 ms: it
// returns what is ready when it is, with t unmoved, or t jumps by the
// timeout as soon as the condition holds. Its real timeout passing decides
// nothing (docs/design.md: virtual time is a function of events, never of
// latency): an LLM call that takes 40 s and one answered from a bundle in
// a millisecond leave the agent's clock, and which of its waits returned,
// the same. Only the stall limit ([Config].StallLimit, 60 s by default,
// and never less than the wait's own timeout) lets real time decide: a
// wait still held then expires as its timeout would have, counted as a
// "stall" escape with a note (a server that never answers, a thread that
// computes without ever blocking). Readiness is judged on copies of the waited descriptors
// taken for that call (pidfd_getfd through a pidfd the supervisor keeps
// per process until its exec or exit), so a number reused for another file
// is judged as that file, and no copy keeps a file open past the call. The second half matters to Go: its netpoller waits with
// the next timer's deadline while another thread registers a socket it is
// connecting, and jumping then would time the dial out. A wait that sets a
// signal mask (ppoll, pselect6, epoll_pwait with a mask: bash's `read -t`)
// jumps the same way when no signal is pending that the mask would let in
// (a jump leaves no time for one to arrive but a timer's, judged under the
// mask); a real wait with a mask runs as the kernel's, counted as such:
// dal cannot apply the mask for it.
//
// A whole tree is settled ([Supervisor.Settled], settle.go) when every
// thread of every traced process is blocked on something only the
// outside can end: asleep in the kernel, or held here for outstanding I/O
// with none of its descriptors ready; not running, not stopped for the
// tracer, not in a call the supervisor answers at once. dal's proxy asks
// before it hands the tree a response (docs/design.md §3.1).
//
// # Timers (strict mode)
//
// alarm, setitimer(ITIMER_REAL), POSIX timers (timer_create on a realtime,
// monotonic or boottime clock; SIGEV_SIGNAL, SIGEV_THREAD_ID, SIGEV_NONE)
// and timerfds keep their deadlines on the process's virtual clock
// (timers.go). timer_create and timerfd_create run as the kernel would; the
// supervisor answers settime and gettime itself, so the kernel's timers
// are never armed, and takes a POSIX timer's signal, value and target from
// /proc/<pid>/timers and a timerfd's clock from its fdinfo. Absolute
// deadlines are on the virtual clock. A timer fires when its process's
// clock reaches its deadline while the process waits:
//
//   - a sleep or a timed wait that would jump (see below) jumps to the
//     first deadline before its end whose expiry ends it: a timerfd the
//     wait watches becomes readable (TFD_IOC_SET_TICKS on dal's copy of
//     the file, pidfd_getfd: the count and readiness are the kernel's
//     own state), or a signal the thread neither blocks nor ignores is
//     sent (rt_sigqueueinfo with SI_TIMER, the timer's id, overrun and
//     sigev_value; kill for an alarm) and interrupts the call, which
//     returns EINTR with the time left (nanosleep's rem, select's and
//     ppoll's timeout) as the kernel's would. Timers whose expiry does
//     not end the wait fire on the way, all their expirations at once;
//   - an untimed wait — pause, sigsuspend, sigwaitinfo, poll, ppoll,
//     select, pselect6, epoll_wait, epoll_pwait, epoll_pwait2 without a
//     timeout on
//     descriptors none of which is outstanding I/O, a blocking read of a
//     timerfd — is left to the kernel (handing it over would make an
//     event loop's ready epoll_wait pay a round trip) and found by the
//     process's watcher: a goroutine that, while the process has a timer
//     armed, reads /proc every 200 µs to 4 ms, and fires the first timer
//     that ends the wait into the kernel's own wait, so a signal meets
//     the mask sigsuspend or ppoll set. The look costs real latency, never
//     virtual time; rt_sigtimedwait is handed over and served like a
//     sleep;
//   - a child's exit while the parent waits: when the parent's first
//     timer whose signal ends its wait is due before the child's time, it
//     fires there, before the child's end is visible (SIGALRM is pending
//     before SIGCHLD), and the parent's clock stops at the deadline. So
//     coreutils `timeout 5 sleep 10` (timer_create, then sigsuspend while
//     its child runs) exits 124 and `timeout 5 sleep 1` exits 0, both at
//     once. The exit of a child whose single-threaded parent has not
//     reached its wait yet (timeout arms its timer after the fork, and the
//     tracer may see the child's stops first) waits for it, up to 100 ms.
//
// A wait for a signal or an untimed wait jumps only in a process with one
// thread and no child it has not reaped. A timer a process does not wait
// for — a busy loop, a wait on outstanding I/O, a process with several
// threads, whose sleeps are real — fires on its backstop: a real timer
// armed at the same distance from the real now as the deadline from the
// virtual one (so an absolute deadline waits seconds, not the months
// between the virtual epoch and now). It moves the process's clock to the
// deadline and counts as an escape ("timer"), which makes the clock
// uncaptured. Seeded and logged modes leave timers to the kernel: their
// clock is real. POSIX timers go at an exec, alarms and timerfds stay;
// a fork's child has none.
//
// Absolute deadlines a program computed from its virtual clock
// (FUTEX_WAIT_BITSET, FUTEX_LOCK_PI, futex_waitv, clock_nanosleep with
// TIMER_ABSTIME in a multi-threaded process) are translated into the real
// clock before the kernel sees them, so a condition variable's 5 s timeout
// waits 5 s, not months (the virtual epoch is in the past) or never.
//
// # Ports (strict mode)
//
// The kernel gives a socket bound to port 0 an ephemeral port at a random
// offset, in the sandbox's own network namespace too. The filter hands
// every bind to the supervisor (bindport.go); one of an IPv4 or IPv6
// socket to port 0 gets the tree's next port: a sequence in the default
// ephemeral range 32768–60999 from a first port the seed draws (stream
// "net/bind_port"), one per such bind in the order the tree makes them,
// skipping ports in use. The supervisor binds the caller's own socket
// (its pidfd_getfd copy is the same socket, in the caller's namespace) to
// the caller's address with that port and answers with the result. Other
// binds run as the kernel's; 64 ports in use in a row let the kernel
// choose, a "port" escape. An implicit bind (connect, listen or sendto
// on an unbound socket) keeps the kernel's port. Cost: the seccomp round
// trip per bind.
//
// # The machine (strict mode)
//
// sysinfo describes the machine whose /proc/uptime, /proc/loadavg,
// /proc/stat and /proc/meminfo the sandbox serves (sysinfo.go; package
// sandbox's procclock.go): uptime is the caller's virtual monotonic clock
// in whole seconds, rounded up as the kernel rounds; loads are 0 and
// procs 1; the memory totals are the host's (a replay on another machine
// shows that machine's), and what varies with the host's load is fixed:
// half of the memory free, all swap free, none shared or buffering. glibc
// calls it in getloadavg, for sysconf(_SC_PHYS_PAGES) and
// _SC_AVPHYS_PAGES, and so in qsort_r of more than 1 KiB (bash, Python
// and Node at start, seen with strace -k), as do coreutils sort and Go's
// syscall.Sysinfo. It is counted as a clock read served, without moving
// the clock by a quantum: a program's times do not depend on whether its
// C library sorted something. A served sysinfo costs the seccomp round
// trip: 12.4–21.7 µs against 0.48–1.3 µs native (BenchmarkVirtSysinfo,
// 20,000 calls, 6 runs, load average 3.5–6 on 2 CPUs), once per process
// for the C library's own calls (it keeps the page count).
//
// times returns the caller's virtual monotonic clock in clock ticks
// (USER_HZ: 100 a second from the clock's origin, a point POSIX leaves
// arbitrary; Python's os.times().elapsed), a clock read that advances it
// as clock_gettime's does; the CPU times it fills in stay real, read from
// /proc/<tgid>/stat (cputimes.go) and counted as "cpu_clock". Cost: the
// round trip and the /proc read, 35.6–76.5 µs against 0.59–1.9 µs native
// (BenchmarkVirtTimes, 3 runs, load average 5): the read is about 20 µs.
//
// A read of the clock's discipline — adjtimex or clock_adjtime on
// CLOCK_REALTIME with modes 0 (glibc's adjtimex and ntp_gettime) —
// returns the virtual realtime (a read) and the state of a clock no NTP
// daemon disciplines: unsynchronized (TIME_ERROR), no offset or frequency
// correction, the largest error estimates; the kernel's constants (tick,
// tolerance, precision, TAI offset) are the host's (adjtimex.go). A
// change goes to the kernel, counted as "clock_adjust".
//
// # File times and inode numbers (strict mode)
//
// The filter hands stat, lstat, fstat, newfstatat and statx to the
// supervisor, which makes the call for the caller (statcall.go: from the
// caller's descriptor or working directory, in its root and mount
// namespace, following a link exactly when the caller's call would, never
// through a /proc link whose target depends on who follows it) and rewrites
// what the run made (filetimes.go). A value the agent's tree made (a time
// from the agent's start to the real now) gets a time on the virtual clock
// the first time any process sees it: the observer's instant — its virtual
// realtime, or its base when it has several threads, less what looking at
// files added to it — or just after the latest time given out when that is
// later; values one process first sees at one instant share a time, so the
// order its threads look in and how many distinct values the kernel's
// coarse timestamps made do not matter. A process that sees a time past its
// clock moves its clock there, as a message moves a Lamport clock, but
// never hands that move to its parent at its exit: whether the parent was
// already waiting is the scheduler's. What dal made before the agent
// started (the sandbox's /tmp and /dev, its proxy's certificates) shows the
// run's start, as do pipes, sockets, FIFOs and device nodes, whose times
// move with their I/O and which both ends of a pipeline look at at once.
// A new inode gets 2^32 + (time first seen − epoch)×256 + its rank at that
// time; pipes and the like count apart from 2^52; devices with no number
// of their own (overlay, tmpfs) are numbered in the order first seen. Files
// from before the run keep their times and numbers. Seeded and logged
// modes keep real file times, as their clock is real.
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
//   - An exec takes the vDSO's pages with the old image: the supervisor
//     knows an image's reads as of the process's last fork, clock system
//     call or thread exit, and the new image's clock starts there, so it
//     can repeat values of reads made since (TestVDSOServesCAndStaticC:
//     one). Asking the supervisor at every execve would count them all,
//     but the sandbox's init waits in vfork for the agent's own exec while
//     holding its runtime's processor: a stop-the-world then leaves no
//     goroutine to answer, and runs hung. Such reads are not counted as
//     served either.
//   - A vfork child shares its parent's memory and so its vDSO pages: its
//     reads before its exec count in its parent's stream.
//   - The supervisor reads the vDSO's counter while threads may be adding
//     to it (two equal reads in a row), and a getrandom buffer could be
//     refilled under a thread still copying from it only if the other
//     buffer ran out meanwhile: both matter only to multi-threaded
//     processes, whose values already depend on the scheduler.
//   - The kernel's vDSO stays mapped, unannounced: a program that finds it
//     in /proc/self/maps and calls it reads real time. Nothing else in the
//     image refers to it.
//   - dal's vDSO exists for x86-64 only: on arm64, and for 32-bit
//     programs, new images have no vDSO and take the supervisor's path.
//   - File times: a file one process sees made while another made it (a
//     pipeline, background jobs, threads of a multi-threaded process that
//     first see new inodes at one instant) gets its time and rank from
//     whoever looks first. getdents' d_ino (`ls -i` without -l), /proc
//     (fd links' pipe:[ino], mountinfo) and the 32-bit ABI's stat64 are
//     not rewritten; files from before the run keep their real inode
//     numbers, which a replay's fresh copy of the workspace changes. A stat
//     through /proc (/proc/self/..., /dev/stdin), by a process with a root
//     or mount namespace of its own, or on a kernel without openat2 runs
//     as the kernel would, with real times, and counts as a clock escape.
//     chdir is not handed over (the init makes the agent's first chdir in
//     a vfork child while its tracer thread holds a Go processor: a
//     notification then hung every run), so the working directory is
//     opened at every relative stat. Cost: above.
//   - Timers: a timer a process does not wait for fires on the real clock
//     (above), an escape; so do a process's timers while it has several
//     threads or a child running, unless a timed wait that jumps reaches
//     them first. A process that reads its clock past a deadline without
//     waiting (each read adds the quantum) gets the timer at its next wait
//     or on the backstop. An alarm's signal carries SI_USER from the sandbox's init,
//     not the kernel's SI_KERNEL; timer_getoverrun is the kernel's (0), the
//     overrun dal counted is in the signal's si_overrun. A timerfd a child
//     inherited is timed per process; TFD_TIMER_CANCEL_ON_SET never
//     cancels (the virtual clock is never set); without TFD_IOC_SET_TICKS
//     (CONFIG_CHECKPOINT_RESTORE) each fire counts one expiration. A sleep
//     or timed wait a timer's signal interrupted is restarted by the
//     kernel when the handler has SA_RESTART, and dal answers the restart
//     EINTR, what the kernel would have returned; without SA_RESTART the
//     thread's next identical call gets EINTR once (dal cannot read the
//     flag). A parent that is still running when its child exits holds
//     that exit up to 100 ms, then keeps its own time as before.
//   - A sleep in a multi-threaded process is real (see above), so Go's
//     time.Sleep — a timer on the netpoller, an epoll wait — jumps only
//     when no descriptor of the poller is outstanding I/O.
//   - Values in a multi-threaded process depend on the order its threads
//     read the clock, which the scheduler decides. A Go program with
//     GOMAXPROCS=1 (strict mode's default) runs one goroutine at a time, in
//     an order SCHED_BATCH keeps: its map order, math/rand/v2 values and
//     clock repeat (goprobe in e2e). Not always: after a sleep, under
//     load, the runtime's own reads vary by a few (a replay drifted by 4
//     µs under CI's load); and a run can draw the other map order and
//     math/rand/v2 values: the runtime hands its main goroutine between two
//     threads during initialization, and when a time slice ends inside a
//     hand-off (other work on the CPU) the main thread makes a fourth
//     thread, whose seed it draws from its own generator. Measured with
//     e2e's goprobe: none of 1,500 runs one at a time, 4 of 2,320 with
//     six to eight runs at once on two CPUs; such a run starts main with 4 threads
//     instead of 3 (goprobe's threads_at_main). With more processors its goroutines
//     run in parallel and the order is the machine's.
//   - Without HWCAP2_FSGSBASE (kernels before 5.9, CPUs without it) Go's
//     sysmon reads move the clock as any thread's do.
//   - Per-process times in /proc are real: /proc/<pid>/stat's start time
//     counts the host's clock ticks since its boot (two strict runs of
//     `cut -d' ' -f22 /proc/self/stat` printed 3494912 and 3494914), so
//     ps's START (the virtual boot time plus those ticks) and ELAPSED
//     (the virtual /proc/uptime less them: negative) differ from run to
//     run, as do /proc/vmstat (vmstat's bi and bo), /proc/interrupts,
//     /proc/<pid>/sched (se.exec_start, real monotonic ms), /proc/timer_list
//     ("now at", real monotonic ns, root only) and an RTC where the
//     machine has one (/dev/rtc, /sys/class/rtc: none on the machines
//     dal was tested on). dal does not see these reads (an open for reading
//     is not handed over), so they are not counted as escapes. A time
//     namespace whose boot-time offset puts the host's boot clock at the
//     virtual origin would bring the start times to within the real time
//     the run took.
//   - A 32-bit program's sysinfo (the other ABI's) is the host's, and is
//     not counted; the /proc files it reads are the virtual machine's.
//   - ptrace: a program in the sandbox cannot trace another (strace, gdb):
//     dal is the tracer. A group stop (SIGSTOP, SIGTSTP) does not stop.
//   - dal-exec run (strict and seeded) is under this layer in a direct
//     sandbox of the host's files (internal/sandbox/direct.go); logged
//     and default runs are not.
//
// # Counts
//
// The supervisor counts what it served and what it let through per
// category; [Counts] are written where the sandbox's caller reads them, so
// coverage reports what was served, never what was merely possible. The
// vDSO's clock reads are counted as served when the supervisor reads its
// counter (a thread's exit, a fork, a clock system call); like the
// kernel's vDSO reads they are not system calls and are not in Calls.
package sysvirt
