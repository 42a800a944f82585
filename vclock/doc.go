// Package vclock is dal's virtual time: per-process clock streams, their
// names, and the tick logs that record and replay real clock readings.
//
// # Streams
//
// Every process of a session owns one stream, named by spawn order under its
// parent: the root is "0", its children "0.1", "0.2", their children "0.1.1".
// Names never depend on PIDs, so two runs of the same program name their
// processes the same way.
//
// # Strict mode
//
// A stream keeps one integer offset t (nanoseconds since the stream began,
// starting at 0). A clock read adds the quantum (default 1µs) and returns
// Epoch+t for realtime clocks or Mono+t for monotonic ones; a sleep of d adds
// d and returns at once; an idle event loop jumps t to its next timer
// deadline. Values therefore depend only on the process's own sequence of
// reads, sleeps and timers, never on the machine.
//
// # Outstanding I/O (the rule the shims' event loops follow)
//
// When an event loop would block with its next timer T away, it first polls
// I/O without blocking. Ready I/O is handled and virtual time does not move.
// If nothing is ready:
//
//   - with no outstanding I/O (no connected socket, pipe, child process,
//     pending DNS or worker job — listening sockets do not count), virtual
//     time jumps T ahead at once: a 60 s sleep costs microseconds;
//   - with outstanding I/O, the loop waits for real I/O for at most T of wall
//     time. A response that arrives first is handled at the same virtual
//     time, and the wait starts over once the program has run; if none
//     arrives for T, virtual time jumps T ahead and the timer fires.
//
// Idle pooled keep-alive connections (unref'd by Node's http.Agent and
// undici) are not outstanding I/O. Timers the program unref'd never fire
// while nothing else holds the loop: Node would exit first, and so does a
// shimmed process (undici's 499 ms housekeeping tick would otherwise fire
// or not depending on how fast the process reached its end).
//
// So a request racing its timeout resolves the same way on every run whose
// server answers within the timeout — always the case on replay, where
// answers are served locally — and nothing ever freezes: a listening server
// lets time jump, a long poll runs at real speed. Limits: a response slower
// than its (virtual) timeout loses the race in real time as it would without
// dal, so a flaky live endpoint can change the outcome of a strict run that
// is not replaying; and an event loop dal does not own (uvloop, a C
// extension's own threads) runs on real timers, which the shims report.
//
// # Programs without a shim
//
// Every other process of a strict run (C, Go, Rust, shell tools) reads
// these streams through dal's syscall layer (internal/sysvirt, whose doc
// has the details and every measurement): dal's vDSO serves clock reads in
// the process (9 ns a read from C, native 25 ns, libfaketime 65 ns; make
// bench), the supervisor serves the system calls (a seccomp round trip,
// about 10 µs). Limits, measured:
//
//   - getrandom from C with glibc 2.36 is a system call, served in about
//     10 µs (native 0.4 µs): the 2 µs target is met only where the C library
//     calls the vDSO (glibc 2.41+, Go 1.24+).
//   - A sleep in a multi-threaded process is real and does not move t
//     (runtimes sleep on helper threads); its timed waits jump only when no
//     other thread runs.
//   - Go: with GOMAXPROCS=1 (strict's default) map order, math/rand/v2 and
//     the clock repeat to the nanosecond (after a sleep, under load, a few
//     µs may differ). Under load a run can draw the other map order: none
//     of 1,500 runs one at a time, 4 of 2,320 with six to eight at once on two
//     CPUs (a time slice ending inside one of the runtime's hand-offs of
//     its main goroutine between threads; such a run starts main with 4
//     threads instead of 3). A goroutine that computes for more than a second
//     without reading the clock gets the clock moved 10 ms (a counted
//     escape) so a spin-wait ends. With more processors the order is the
//     machine's.
//   - A call the layer does not handle pays the seccomp filter: getppid
//     ~1.25x native, the same as a one-instruction allow-all filter.
//
// # Seeded and logged modes
//
// Reads return real time and are appended to the stream's tick log
// (kind, value). A replay serves the log back in order; a read past its end,
// or of another kind than recorded, is drift: the Player reports it and
// continues deterministically from the last served value.
package vclock
