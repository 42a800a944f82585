// Package runner starts an agent under dal: it connects to dald (or embeds
// one), opens a session, installs the runtime shims, applies the guard
// rails, runs the agent with a watchdog, and collects the session's clock
// log. cmd/dal-exec's subcommands are thin layers over it.
package runner

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/leftover"
	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/internal/sandbox"

	"github.com/dal-runtime/dal/internal/daemon"
	"github.com/dal-runtime/dal/internal/shim"
	"github.com/dal-runtime/dal/internal/trace"
	"github.com/dal-runtime/dal/internal/usage"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
)

// Modes of docs/design.md §2.
var Modes = []string{"strict", "seeded", "logged", "default"}

// Spec is one run.
type Spec struct {
	Args    []string // command and arguments
	Dir     string   // working directory ("" = current)
	Mode    string
	Seed    uint64
	Epoch   time.Time
	Quantum time.Duration
	CPUs    []int // nil: not pinned
	Timeout time.Duration
	// StallLimit is the syscall layer's (sysvirt.Config.StallLimit); 0
	// its default.
	StallLimit time.Duration
	KeepEnv    []string
	// Inherit, when set, replaces the allowlisted variables (PATH, HOME,
	// ...) read from dal-exec's environment: a replay passes the recorded
	// ones, so the agent sees what it saw.
	Inherit map[string]string
	// Env are further variables set like the guard rails (after them), e.g.
	// the network capture's proxy and trust settings.
	Env    map[string]string
	Socket string // "" = a running default dald, else embedded
	// TraceFromExec > 0 asks dald to trace the agent's process tree with
	// eBPF, counting each process from its lineage's n-th exec after
	// dal-exec's fork: 1 for an agent dal-exec execs itself, 2 for one a
	// sandbox init (itself an exec) starts. 0: not traced.
	TraceFromExec int
	// TraceIfObserved: with an embedded dald, trace only when Metrics is
	// set (nobody else would see the counts); a separate dald always traces.
	TraceIfObserved bool
	// Metrics, when set, is the registry an embedded dald keeps (for
	// --metrics-textfile); a separate dald keeps its own.
	Metrics  daemon.Metrics
	ClockOut string // write clock.json here ("" = not kept)
	Replay   *vclock.File
	// Wrap, when set, builds the command that runs the agent (argv[0] is
	// already resolved through PATH), e.g. inside a sandbox. The runner
	// still owns its process attributes, start, watchdog and wait.
	Wrap func(argv, env []string, dir string) (Wrapped, error)
	// ReadOnly and Writable are absolute host paths shown to a sandboxed
	// agent read-only (--ro-bind) or read-write (--bind), besides what
	// its private home shows (see HomeFor).
	ReadOnly, Writable []string
	// Secrets are further paths a sandboxed agent never sees: the signing
	// key a record was given (--key).
	Secrets []string
	// Limits are a sandboxed agent's resource limits (--memory, --pids,
	// --file-size).
	Limits sandbox.Limits
	// Isolate, when Wrap is not set, starts the agent in namespaces of its
	// own under the syscall layer, on the host's files (isolate.go): what
	// `dal-exec run` does in strict and seeded modes.
	Isolate bool

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Log            io.Writer // dal's own messages ("dal: ...")
}

// Wrapped is a command built by [Spec.Wrap].
type Wrapped struct {
	Cmd *exec.Cmd
	// Wait replaces Cmd.Wait: it returns setup failures of the wrapper as
	// errors of dal (exit 2), not of the agent.
	Wait func() error
	// Close, when set, releases what the wrapper holds. The runner calls
	// it once done with the command, whether it started it or not.
	Close func() error
	// Ended, when set, says after Wait how the agent inside ended (the
	// wrapper's own exit status cannot): the signal that killed it (0:
	// it exited) and the processes it left running, which the wrapper
	// killed. ok is false when the wrapper could not say.
	Ended func() (sig syscall.Signal, left int, ok bool)
	// Threads, when set, says after Wait how many threads the wrapper
	// started in the agent's pid namespace while the agent ran: each
	// took a pid from its tree (see sandbox.Cmd.ThreadsDuring).
	Threads func() int
	// Start, when set, replaces starting Cmd: the wrapper started it
	// already (with the runner's streams, process group and CPUs: see
	// prepareCmd) and Start lets it run the agent.
	Start func() error
}

// Result is what a run produced.
type Result struct {
	ExitCode int
	TimedOut bool
	Killed   int // processes killed by the watchdog or left behind
	Wall     time.Duration
	Env      Env
	Rails    []string // names of the guard-rail variables set
	Clock    *vclock.File
	Daemon   string // "embedded" or the socket path
	// Trace is what dald's boundary tracer saw (nil when not asked for).
	Trace *Trace
}

// Trace is a session's boundary observations from the kernel's side.
type Trace struct {
	Tracing  bool              // false: not observed (Reason says why)
	Reason   string            `json:",omitempty"`
	Syscalls map[string]uint64 // name -> count over the session's processes
	Events   []wire.TraceEvent // notable crossings
	Drops    uint64            // events lost
}

// UsageError is a mistake in what the user asked for, as opposed to a
// failure of dal itself: the one usage-error type, usage.Error, under the
// name internal/record constructs it by.
type UsageError = usage.Error

type session struct {
	id, socket, clockFile string
	token                 string // the agent's DAL_SESSION_TOKEN; never in Result.Env
	client                *wire.Client
}

// connect dials the given daemon, a running default one, or starts an
// embedded one in tmp. The returned stop function shuts an embedded daemon.
func connect(spec *Spec, tmp string) (*wire.Client, string, func(), error) {
	closeTracer := func() {}
	hello := wire.Request{Role: wire.RoleExec}
	if spec.Socket != "" {
		c, _, err := wire.Dial(spec.Socket, hello)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
				err = fmt.Errorf("no dald answers at %s: start `dald --socket %s`, or drop --socket/DAL_SOCKET to use the embedded one", spec.Socket, spec.Socket)
			}
			return nil, "", nil, err
		}
		return c, spec.Socket, func() {}, nil
	}
	if def := wire.DefaultSocket(); fileIsSocket(def) {
		c, _, err := wire.Dial(def, hello)
		if err == nil {
			return c, def, func() {}, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			return nil, "", nil, err
		}
	}
	path := filepath.Join(tmp, "dald.sock")
	opts := daemon.Options{Metrics: spec.Metrics}
	if spec.TraceFromExec > 0 && (spec.Metrics != nil || !spec.TraceIfObserved) {
		if tr, off := trace.Open(false, false); tr != nil {
			opts.Tracer = tr
			closeTracer = func() { tr.Close() }
		} else {
			opts.TracerOff = off
		}
	} else {
		opts.TracerOff = "no one would read the counts (pass --metrics-textfile, or run a dald)"
	}
	srv, err := daemon.Listen(path, opts)
	if err != nil {
		closeTracer()
		return nil, "", nil, fmt.Errorf("start the embedded dald: %w", err)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		closeTracer()
	}
	c, _, err := wire.Dial(path, hello)
	if err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("connect to the embedded dald: %w", err)
	}
	return c, "embedded", stop, nil
}

func fileIsSocket(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}

// Run runs spec to completion. The error is non-nil only when dal itself
// failed (exit 2); the agent's own failure is its exit code in Result.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if len(spec.Args) == 0 {
		return nil, UsageError{Err: errors.New("no command given: put it after --, e.g. dal-exec run -- python3 agent.py")}
	}
	if spec.Log == nil {
		spec.Log = os.Stderr
	}
	inside := spec.Isolate && spec.Wrap == nil && sandbox.Inside()
	isolated := spec.Isolate && spec.Wrap == nil && !inside
	// An isolated run's sandbox starts now, while dal-exec prepares the
	// agent: its init's start and set-up, 4-5 ms, overlap what follows.
	// Not when dald may trace the run, which must track dal-exec before
	// the init is forked.
	var early *earlySandbox
	if isolated && !mayTrace(&spec) {
		early = startEarly(&spec)
		defer early.abort()
	} else {
		DropSpeculation()
		if isolated {
			sandbox.FindInit() // meanwhile
		}
	}
	path, err := exec.LookPath(spec.Args[0])
	if err != nil {
		return nil, UsageError{Err: fmt.Errorf("command %q not found: check its spelling or PATH", spec.Args[0])}
	}
	tmp, err := mkdirFixedWidth(os.TempDir(), "dal-run-")
	if err != nil {
		return nil, fmt.Errorf("create the run's private directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	// The early sandbox makes its staging directory in tmp: ended first.
	defer early.abort()
	if held, err := leftover.Hold(tmp); err == nil {
		defer held.Release()
	}

	if early != nil {
		early.configure(tmp)
	}
	// Private directories of runs that died are removed meanwhile; a live
	// run's, this one's too, is locked (internal/leftover) and kept.
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		leftover.Sweep(os.TempDir(), "dal-run-*")
	}()
	defer func() { <-swept }()
	// The shims' check (reading and comparing their tree, about a
	// millisecond) runs beside dald's start and the session's.
	shims := installShims()
	defer shims()

	client, where, stop, err := connect(&spec, tmp)
	if err != nil {
		return nil, err
	}
	if where != "embedded" && early != nil {
		// A dald started meanwhile: it traces, so the init starts later.
		early.abort()
		early = nil
	}
	defer stop()
	defer client.Close()

	rep, err := client.Call(wire.Request{Op: wire.OpSessionOpen, Mode: spec.Mode, Seed: spec.Seed,
		EpochNS: spec.Epoch.UnixNano(), QuantumNS: int64(spec.Quantum), Replay: spec.Replay != nil})
	if err != nil {
		return nil, fmt.Errorf("open a session: %w", err)
	}
	sess := session{id: rep.Session, token: rep.Token, client: client, clockFile: spec.ClockOut}
	// The agent gets the session's own socket, which serves its processes
	// and nothing else (no new sessions, no other session's), never
	// dald's: see internal/daemon/sessionsock.go.
	switch {
	case rep.Socket != "":
		sess.socket = rep.Socket
	case where == "embedded":
		sess.socket = filepath.Join(tmp, "dald.sock")
	default:
		sess.socket = where
		fmt.Fprintf(spec.Log, "dal: the dald at %s gives sessions no socket of their own (an older release): the agent can reach dald's own socket and open sessions there; run a dald of this release\n", where)
	}
	if sess.clockFile == "" {
		sess.clockFile = filepath.Join(tmp, "clock.json")
	} else if sess.clockFile, err = filepath.Abs(sess.clockFile); err != nil {
		return nil, err
	}
	if spec.Replay != nil {
		if err := load(client, sess.id, spec.Replay); err != nil {
			return nil, err
		}
	}
	shimDir, err := shims()
	if err != nil {
		return nil, err
	}

	env := keep(os.Environ(), spec.KeepEnv)
	if spec.Inherit != nil {
		for _, k := range passEnv {
			delete(env, k)
		}
		for k, v := range spec.Inherit {
			if Allowlisted(k) {
				env[k] = v
			}
		}
	}
	rails := guardRails(env, &spec, sess, shimDir.PythonPath(), shimDir.NodeRequire())
	// A strict run outside a sandbox (which mounts a fresh /tmp) gets a
	// TMPDIR of its own: files an earlier run left in a shared one would
	// change this run's temporary names. --keep-env TMPDIR keeps the caller's.
	if spec.Mode == "strict" && spec.Wrap == nil && !slices.Contains(spec.KeepEnv, "TMPDIR") {
		d := filepath.Join(tmp, "tmp")
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("create the run's TMPDIR: %w", err)
		}
		env["TMPDIR"] = d
		rails = append(rails, "TMPDIR")
		sort.Strings(rails)
	}

	res := &Result{Env: env, Rails: rails, Daemon: where}
	if inside {
		fmt.Fprintln(spec.Log, "dal: this run is inside another dal sandbox, whose syscall layer serves its processes; it gets no namespaces of its own")
	} else if isolated {
		isolate(&spec, tmp, where == "embedded", early, []string{string(shimDir)})
		if spec.TraceFromExec > 0 {
			spec.TraceFromExec++ // the sandbox's init execs first
		}
	}
	if spec.TraceFromExec > 0 {
		// dald tracks us before the agent exists: nothing it forks escapes.
		rep, err := client.Call(wire.Request{Op: wire.OpTraceStart, Session: sess.id, FromExec: spec.TraceFromExec})
		if err != nil {
			return nil, fmt.Errorf("start boundary tracing: %w", err)
		}
		res.Trace = &Trace{Tracing: rep.Tracing, Reason: rep.Reason}
	}
	// The session's capability goes to the agent only: not into Result.Env,
	// so never into env.json or a bundle.
	agentEnv := maps.Clone(env)
	agentEnv[wire.EnvToken] = sess.token
	if err := execute(ctx, &spec, path, agentEnv, res); err != nil {
		return nil, err
	}
	if res.Trace != nil && res.Trace.Tracing {
		rep, err := client.Call(wire.Request{Op: wire.OpTraceReport, Session: sess.id})
		if err != nil {
			return nil, fmt.Errorf("read the boundary trace: %w", err)
		}
		res.Trace = &Trace{Tracing: rep.Tracing, Reason: rep.Reason, Syscalls: rep.Syscalls, Events: rep.Events, Drops: rep.Drops}
	}
	res.Clock, err = collect(client, sess.id, &spec)
	if err != nil {
		return res, err
	}
	client.Call(wire.Request{Op: wire.OpSessionClose, Session: sess.id})
	if spec.ClockOut != "" {
		if err := res.Clock.WriteFile(sess.clockFile); err != nil {
			return res, fmt.Errorf("write the clock log: %w", err)
		}
	}
	if spec.Replay != nil {
		res.Clock.Drift = append(res.Clock.Drift, vclock.Compare(spec.Replay, res.Clock)...)
	}
	if len(res.Clock.Streams) == 0 && shimmed(spec.Args[0]) {
		fmt.Fprintf(spec.Log, "dal: %s never loaded the dal shim (run with -S, -I or -E?), so its clocks and randomness were not virtualized\n", filepath.Base(spec.Args[0]))
	}
	for _, d := range res.Clock.Drift {
		fmt.Fprintf(spec.Log, "dal: drift in stream %s (%s): %s\n", d.Stream, d.What, d.Detail)
	}
	return res, nil
}

// installShims installs the runtime shims ([shim.Install]) on a goroutine
// of its own; the function it returns waits for the outcome (call it
// before returning, so that no installation is cut short).
func installShims() func() (shim.Dir, error) {
	done := make(chan struct{})
	var dir shim.Dir
	var err error
	go func() {
		defer close(done)
		dir, err = shim.Install()
	}()
	return func() (shim.Dir, error) {
		<-done
		return dir, err
	}
}

// prepareCmd gives cmd, the agent's or its wrapper's, the run's standard
// streams, a process group and a parent-death signal, and makes dal-exec
// the subreaper of what it starts.
func prepareCmd(cmd *exec.Cmd, spec *Spec) error {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group, so the tree can be signalled at once -- except
	// on a terminal, where the agent must stay in the foreground group to
	// read input.
	cmd.SysProcAttr.Setpgid = !IsTerminal(spec.Stdin)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	// Output copying (when Stdout is not a file) must not outlive a killed
	// tree by long.
	cmd.WaitDelay = 2 * time.Second
	if err := becomeSubreaper(); err != nil {
		return fmt.Errorf("become the agent's subreaper: %w", err)
	}
	return nil
}

// mayTrace reports whether dald may trace spec's run: a dald of the
// user's, or an embedded one asked to.
func mayTrace(spec *Spec) bool {
	return spec.TraceFromExec > 0 && (spec.Socket != "" || spec.Metrics != nil || !spec.TraceIfObserved || fileIsSocket(wire.DefaultSocket()))
}

// execute starts the agent, forwards signals, enforces the timeout and
// waits for the agent and its whole tree.
func execute(ctx context.Context, spec *Spec, path string, env Env, res *Result) error {
	cmd := &exec.Cmd{Path: path, Args: spec.Args, Dir: spec.Dir, Env: env.List()}
	wait := cmd.Wait
	var ended func() (syscall.Signal, int, bool)
	var threads func() int
	start := func() error { return startPinned(cmd, spec.CPUs) }
	if spec.Wrap != nil {
		argv := append([]string{path}, spec.Args[1:]...)
		w, err := spec.Wrap(argv, env.List(), spec.Dir)
		if err != nil {
			return err
		}
		if w.Close != nil {
			defer w.Close()
		}
		cmd, wait, ended, threads = w.Cmd, w.Wait, w.Ended, w.Threads
		if w.Start != nil {
			start = w.Start
		}
	}
	if cmd.Process == nil {
		if err := prepareCmd(cmd, spec); err != nil {
			return err
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	began := time.Now()
	if err := start(); err != nil {
		if cmd.Process != nil {
			// Started early, and it could not be told what to run.
			cmd.Process.Kill()
			wait()
		}
		return fmt.Errorf("start %s: %w", spec.Args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()

	var watchdog <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		watchdog = t.C
	}
	cancelled := ctx.Done()
	var werr error
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case s := <-sigs:
			// In its own group the agent misses signals sent to ours;
			// sharing our group, it already got the terminal's.
			if cmd.SysProcAttr.Setpgid {
				syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
			} else if s == syscall.SIGTERM || s == syscall.SIGHUP {
				cmd.Process.Signal(s)
			}
		case <-watchdog:
			res.TimedOut = true
			res.Killed += signalTree(cmd.Process.Pid, cmd.SysProcAttr.Setpgid)
			watchdog = nil
		case <-cancelled:
			res.Killed += signalTree(cmd.Process.Pid, cmd.SysProcAttr.Setpgid)
			cancelled = nil
		}
	}
	res.Wall = time.Since(began)
	left := 0
	// A sandbox whose init said nothing was left running holds the whole
	// tree in its pid namespace, below the init: nothing to look for.
	if !sandbox.Exiting(cmd.Process.Pid) {
		left = cleanupTree()
	}
	sig, inside, reported := syscall.Signal(0), 0, false
	if ended != nil && !res.TimedOut {
		sig, inside, reported = ended()
		left += inside
	}
	if res.TimedOut {
		res.Killed += left
		res.ExitCode = 124
		fmt.Fprintf(spec.Log, "dal: --timeout %s reached after %s: killed the agent's process tree (%s); exit code 124\n",
			spec.Timeout, res.Wall.Round(time.Millisecond), plural.Count(res.Killed, "process", "processes"))
		return nil
	}
	if left > 0 {
		res.Killed += left
		fmt.Fprintf(spec.Log, "dal: the agent exited leaving %s running; %s killed\n", plural.Count(left, "process", "processes"), plural.Verb(left, "it was", "they were"))
	}
	if threads != nil {
		if n := threads(); n > 0 {
			fmt.Fprintf(spec.Log, "dal: the sandbox's init started %d thread(s) while the agent ran, each taking a pid of the agent's namespace: pids of the processes started after may differ from run to run\n", n)
		}
	}
	var ee *exec.ExitError
	var exited interface{ ExitCode() int } // an *exec.ExitError, or the sandbox's own
	switch {
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &exited) && reported:
		res.ExitCode = exited.ExitCode()
		if sig != 0 {
			fmt.Fprintf(spec.Log, "dal: the agent was killed by signal %s%s; exit code %d\n", sig, byLimit(sig, spec), res.ExitCode)
		}
	case errors.As(werr, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled() && ended != nil:
			// The sandbox's init wrote no report: it was killed itself,
			// and the agent's tree with it.
			res.ExitCode = 128 + int(ws.Signal())
			fmt.Fprintf(spec.Log, "dal: the sandbox's init was killed by signal %s before the agent ended; the agent's processes ended with it; exit code %d\n", ws.Signal(), res.ExitCode)
		case ws.Signaled():
			res.ExitCode = 128 + int(ws.Signal())
			fmt.Fprintf(spec.Log, "dal: the agent was killed by signal %s%s; exit code %d\n", ws.Signal(), byLimit(ws.Signal(), spec), res.ExitCode)
		default:
			res.ExitCode = ws.ExitStatus()
		}
	default:
		return fmt.Errorf("run %s: %w", spec.Args[0], werr)
	}
	return nil
}

// load hands a recorded clock log to dald to serve.
func load(c *wire.Client, id string, f *vclock.File) error {
	const page = 32768
	for _, s := range f.Streams {
		l, err := s.Ticks.Log()
		if err != nil {
			return err
		}
		first := true
		for from := 0; first || from < l.Len(); from += page {
			to := min(from+page, l.Len())
			req := wire.Request{Op: wire.OpSessionLoad, Session: id, Stream: s.Stream,
				Kinds: l.Kinds[from:to], Values: l.Values[from:to]}
			if first {
				req.Timers = s.Timers
			}
			if to == l.Len() {
				// Logged draws ride on the last page.
				for label, data := range s.Logged {
					dreq := wire.Request{Op: wire.OpSessionLoad, Session: id, Stream: s.Stream, Label: label, Data: data}
					if _, err := c.Call(dreq); err != nil {
						return fmt.Errorf("load logged draws of stream %s: %w", s.Stream, err)
					}
				}
			}
			if _, err := c.Call(req); err != nil {
				return fmt.Errorf("load recorded ticks of stream %s: %w", s.Stream, err)
			}
			first = false
		}
	}
	return nil
}

// collect reads the session's clock log from dald.
func collect(c *wire.Client, id string, spec *Spec) (*vclock.File, error) {
	rep, err := c.Call(wire.Request{Op: wire.OpSessionDump, Session: id})
	if err != nil {
		return nil, fmt.Errorf("read the session's clock log: %w", err)
	}
	f := &vclock.File{Version: vclock.FileVersion, Mode: spec.Mode, Seed: spec.Seed,
		Epoch: spec.Epoch.UTC(), QuantumNS: int64(spec.Quantum), Streams: []vclock.StreamLog{}, Drift: []vclock.DriftEntry{}}
	for _, s := range rep.Streams {
		var l vclock.Log
		for from := 0; from < s.Ticks; {
			page, err := c.Call(wire.Request{Op: wire.OpSessionTicks, Session: id, Stream: s.Stream, From: from})
			if err != nil {
				return nil, fmt.Errorf("read ticks of stream %s: %w", s.Stream, err)
			}
			if len(page.Values) == 0 {
				break
			}
			l.Append(page.Kinds, page.Values)
			from += len(page.Values)
		}
		var logged map[string][]byte
		for label := range s.Draws {
			var data []byte
			for {
				page, err := c.Call(wire.Request{Op: wire.OpSessionDraws, Session: id, Stream: s.Stream, Label: label, From: len(data)})
				if err != nil {
					return nil, fmt.Errorf("read logged draws of stream %s: %w", s.Stream, err)
				}
				data = append(data, page.Data...)
				if page.End || len(page.Data) == 0 {
					break
				}
			}
			if len(data) > 0 {
				if logged == nil {
					logged = map[string][]byte{}
				}
				logged[label] = data
			}
		}
		timers := s.Timers
		if timers == nil {
			timers = [][2]int64{}
		}
		f.Streams = append(f.Streams, vclock.StreamLog{Stream: s.Stream, Runtime: s.Runtime, Reported: s.Reported,
			Reads: s.Reads, SleepNS: s.SleepNS, NowNS: s.NowNS, Timers: timers, Draws: s.Draws, Unserved: s.Unserved, Ticks: vclock.FromLog(&l), Logged: logged})
	}
	for _, d := range rep.Drift {
		f.Drift = append(f.Drift, vclock.DriftEntry{Stream: d.Stream, What: d.What, Detail: d.Detail})
	}
	return f, nil
}

// shimmed reports whether a command is an interpreter dal's shims load into.
func shimmed(argv0 string) bool {
	base := filepath.Base(argv0)
	return base == "node" || strings.HasPrefix(base, "python")
}

// mkdirFixedWidth creates a new private directory in dir named prefix and
// 16 hex digits. Its path reaches the agent's environment (the clock file,
// an embedded dald's socket), whose size sets where the agent's stack
// starts; os.MkdirTemp's names vary in length, and so would every address
// on that stack from run to run.
func mkdirFixedWidth(dir, prefix string) (string, error) {
	for range 100 {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			return "", err
		}
		p := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
		err := os.Mkdir(p, 0o700)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("no free name for a private directory")
}

// byLimit says which limit of a sandboxed agent's (spec.Wrap set) a death by
// sig means, or "".
func byLimit(sig syscall.Signal, spec *Spec) string {
	if sig == syscall.SIGXFSZ && spec.Limits.FileSize > 0 && spec.Wrap != nil {
		return fmt.Sprintf(": a file it wrote reached the file-size limit of %d bytes (--file-size)", spec.Limits.FileSize)
	}
	return ""
}
