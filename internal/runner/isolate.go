package runner

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
)

// RunDir is where an isolated run ([Spec.Isolate]) shows dal's own files
// to the agent, the same in every run: its TMPDIR (RunDir/tmp), the
// embedded dald's socket, the session token file, the clock log's path
// and the marks directory. The host directory is only a mount point (a
// tmpfs covers it in the agent's mount namespace); dal creates it when
// missing.
const RunDir = "/tmp/.dal-run"

// VirtualConfig is what the syscall layer serves every process of a run
// in spec's mode (docs/design.md §2, §3): in strict mode clocks and
// randomness, in seeded mode randomness; logged and default runs see the
// real values (a logged replay's are served by the shims' logs only).
func VirtualConfig(spec *Spec) sysvirt.Config {
	vc := vclock.DefaultConfig()
	c := sysvirt.Config{Seed: spec.Seed, EpochNS: vc.EpochNS, MonoNS: vc.MonoNS, QuantumNS: vc.QuantumNS, StallLimit: spec.StallLimit}
	if !spec.Epoch.IsZero() {
		c.EpochNS = spec.Epoch.UnixNano()
	}
	if spec.Quantum > 0 {
		c.QuantumNS = int64(spec.Quantum)
	}
	switch spec.Mode {
	case "strict":
		c.Clock, c.Random = true, true
	case "seeded":
		c.Random = true
	}
	return c
}

// isolated is the sandbox of an isolated run in tmp, the run's private
// directory.
func isolated(spec *Spec, tmp string) *sandbox.Config {
	return &sandbox.Config{Direct: true, Staging: staging(tmp), Virtual: VirtualConfig(spec)}
}

// staging is the sandbox's staging directory in tmp; "" until tmp is
// made (an early sandbox).
func staging(tmp string) string {
	if tmp == "" {
		return ""
	}
	return filepath.Join(tmp, "sandbox")
}

// earlySandbox is an isolated run's sandbox started before its agent is
// known ([sandbox.Prestart]), with the runner's streams, process group and
// CPUs; isolate tells it what to run.
type earlySandbox struct {
	cfg    *sandbox.Config
	config chan sandbox.Config // its configuration, once the run's private directory is made
	named  bool                // configure sent it
	ready  chan struct{}       // closed once c is set
	c      *sandbox.Cmd        // the started sandbox; nil when it could not start
	taken  bool                // isolate's Wrap has it: the runner waits for it
	// The streams and CPUs it was started with, which a run must have to
	// take one Speculate started.
	stdin, stdout, stderr any
	cpus                  []int
}

// startEarly starts spec's sandbox on another goroutine, first thing:
// making it and starting its init take 2-3 ms, which dal-exec spends on
// its own preparation meanwhile (the run's private directory, dald, the
// shims' check). [earlySandbox.configure] names its staging directory.
// When it cannot start, isolate starts the sandbox as usual and reports
// why. A sandbox [Speculate] started for this run is taken instead.
func startEarly(spec *Spec) *earlySandbox {
	if e := takeSpeculative(); e != nil {
		if e.fits(spec) {
			e.cfg = earlyConfig(spec)
			return e
		}
		e.abort()
	}
	return prestart(spec)
}

// earlyConfig is the configuration of spec's early sandbox, its staging
// directory not yet named. The sandbox pins the agent: its init, the
// syscall layer's supervisor, starts on any CPU, beside dal-exec's own
// work.
func earlyConfig(spec *Spec) *sandbox.Config {
	cfg := isolated(spec, "")
	cfg.CPUs = spec.CPUs
	return cfg
}

// fits reports whether e was started as spec's sandbox would be: the same
// streams (prepareCmd's) and CPUs.
func (e *earlySandbox) fits(spec *Spec) bool {
	return e.stdin == spec.Stdin && e.stdout == spec.Stdout && e.stderr == spec.Stderr && slices.Equal(e.cpus, spec.CPUs)
}

// prestart is startEarly's start.
func prestart(spec *Spec) *earlySandbox {
	e := &earlySandbox{cfg: earlyConfig(spec), config: make(chan sandbox.Config, 1), ready: make(chan struct{}),
		stdin: spec.Stdin, stdout: spec.Stdout, stderr: spec.Stderr, cpus: spec.CPUs}
	s := *spec // what the goroutine reads: the runner changes spec meanwhile
	cfg := *e.cfg
	go func() {
		defer close(e.ready)
		c, err := sandbox.Prestart(cfg)
		if err != nil {
			return
		}
		if err := prepareCmd(c.Cmd, &s); err != nil {
			c.Close()
			return
		}
		if err := c.Start(); err != nil {
			c.Close()
			return
		}
		cfg, ok := <-e.config
		if !ok || c.Configure(cfg) != nil {
			c.Wait() // the init ends when the gate closes
			return
		}
		e.c = c
	}()
	return e
}

// speculative is the sandbox [Speculate] started, until a run takes it or
// [DropSpeculation] ends it.
var speculative *earlySandbox

func takeSpeculative() *earlySandbox {
	e := speculative
	speculative = nil
	return e
}

// Speculate starts the sandbox of the run that args, dal-exec's command
// line, name, before the command line is parsed: a strict or seeded `run`
// whose flags before the agent's command are among those that do not
// change how its sandbox starts, with no dald to trace it. The init's start
// overlaps the parsing and the run's first steps (about a millisecond).
// [Run] takes the sandbox when the run is the one guessed (the same
// streams and CPUs; the syscall layer's seed, clock and quantum are told
// the init later, with the staging directory) and ends it otherwise; a
// command line that never reaches Run leaves it to [DropSpeculation]. Call
// both from main's goroutine.
func Speculate(args []string) {
	if len(args) < 3 || args[1] != "run" || sandbox.Inside() {
		return
	}
	mode, cpus := os.Getenv("DAL_MODE"), os.Getenv("DAL_CPUS")
	for i := 2; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "mode", "cpus", "seed", "epoch", "quantum", "timeout", "keep-env", "clock-out", "ro-bind", "bind", "memory", "pids", "file-size":
		default:
			return // one that may change the run (or asks for help)
		}
		if !hasVal {
			if i++; i == len(args) {
				return
			}
			val = args[i]
		}
		switch name {
		case "mode":
			mode = val
		case "cpus":
			cpus = val
		}
	}
	switch mode {
	case "":
		mode = "strict" // run's default
	case "strict", "seeded":
	default:
		return
	}
	spec := Spec{Mode: mode, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, TraceFromExec: 1, TraceIfObserved: true}
	if cpus == "" {
		cpus = "first" // --cpus's default
	}
	var err error
	if spec.CPUs, err = CPUsFlag(cpus); err != nil || os.Getenv("DAL_SOCKET") != "" || mayTrace(&spec) {
		return
	}
	speculative = prestart(&spec)
}

// DropSpeculation ends a sandbox [Speculate] started that no run took.
func DropSpeculation() {
	takeSpeculative().abort()
}

// configure names the run's private directory tmp, in which the sandbox's
// staging directory is made.
func (e *earlySandbox) configure(tmp string) {
	e.cfg.Staging = staging(tmp)
	e.named = true
	e.config <- *e.cfg
}

// get waits for the early start and returns the started sandbox, or nil.
func (e *earlySandbox) get() *sandbox.Cmd {
	<-e.ready
	return e.c
}

// abort ends an early sandbox the run did not use (its init exits when the
// gate closes) and reaps its init.
func (e *earlySandbox) abort() {
	if e == nil || e.taken {
		return
	}
	e.taken = true
	if !e.named {
		close(e.config)
	}
	if c := e.get(); c != nil {
		c.Close()
		c.Wait()
	}
}

// isolate has the agent of spec start in a direct sandbox (package
// sandbox, [sandbox.Config.Direct]) under the syscall layer: its own pid,
// mount, UTS and IPC namespaces on the host's files. tmp is the run's
// private directory; embedded says dald's socket is in it. early, when
// set, is the sandbox, started already.
//
// need are dal's own files the agent uses (the shims), shown when under
// the home the sandbox hides.
func isolate(spec *Spec, tmp string, embedded bool, early *earlySandbox, need []string) {
	cfg := isolated(spec, tmp)
	if early != nil {
		cfg = early.cfg
	} else {
		sandbox.FindInit() // meanwhile
	}
	log := spec.Log
	spec.Wrap = func(argv, env []string, dir string) (Wrapped, error) {
		if err := runDir(); err != nil {
			fmt.Fprintf(log, "dal: %v; dal's files keep their paths in %s, which differ from run to run\n", err, tmp)
		} else {
			// The agent's own /tmp, over the host's: two runs' JVMs
			// (each pid 100) would share /tmp/hsperfdata_USER/100 in
			// the host's.
			cfg.RunDir, cfg.PrivateTmp = RunDir, true
			var err error
			if env, err = showRunFiles(env, cfg, tmp, embedded, spec.ClockOut != ""); err != nil {
				return Wrapped{}, err
			}
		}
		if sock := envMap(env)[wire.EnvSocket]; filepath.IsAbs(sock) {
			// dald's socket where it keeps its own path (a dald of
			// the user's), perhaps under the home.
			need = append(slices.Clone(need), sock)
		}
		if err := cfg.HideHome(HomeFor(spec, env, need, dir)); err != nil {
			return Wrapped{}, UsageError{Err: err}
		}
		cfg.Limits = spec.Limits
		if early != nil && !early.taken {
			early.taken = true
			if c := early.get(); c != nil {
				begin := func() error { return c.Begin(*cfg, argv, env, dir) }
				return Wrapped{Cmd: c.Cmd, Start: begin, Wait: c.Wait, Close: c.Close, Ended: c.Ended, Threads: c.ThreadsDuring}, nil
			}
		}
		c, err := sandbox.Command(*cfg, argv, env, dir)
		if err != nil {
			return Wrapped{}, err
		}
		return Wrapped{Cmd: c.Cmd, Wait: c.Wait, Close: c.Close, Ended: c.Ended, Threads: c.ThreadsDuring}, nil
	}
}

// runDir makes sure RunDir exists as a directory of its own, never a
// symbolic link (the sandbox's init opens it again without following one).
func runDir() error {
	err := os.Mkdir(RunDir, 0o755)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s cannot be created (%v)", RunDir, unwrap(err))
	}
	fi, err := os.Lstat(RunDir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (remove it: dal makes it again)", RunDir)
	}
	return nil
}

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// showRunFiles rewrites env so that the paths of dal's own files in the
// run's private directory tmp read the same in every run, below RunDir,
// and adds to cfg what shows them there: TMPDIR, the marks directory, and
// (see ShowDalFiles) dald's socket when embedded, the session token and
// the clock log.
func showRunFiles(env []string, cfg *sandbox.Config, tmp string, embedded, userClock bool) ([]string, error) {
	vars := envMap(env)
	set := map[string]string{}
	if d := vars["TMPDIR"]; d == filepath.Join(tmp, "tmp") {
		cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: d, Target: RunDir + "/tmp"})
		set["TMPDIR"] = RunDir + "/tmp"
	}
	if d := vars[marks.EnvDir]; d != "" {
		// Writers create it on demand; a mount needs it now, writable
		// by whoever the agent runs as (as record's is).
		if err := os.Mkdir(d, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create the marks directory: %w", err)
		}
		if err := unix.Fchmodat(unix.AT_FDCWD, d, 0o777, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("create the marks directory: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: d, Target: RunDir + "/marks"})
		set[marks.EnvDir] = RunDir + "/marks"
	}
	// A dald of the user's keeps its socket's path, the user's own.
	return ShowDalFiles(replaceVars(env, set, nil), cfg, RunDir, embedded, userClock)
}

// ShowDalFiles rewrites the agent's environment env so that dal's own
// variables read the same in every run and replay, with the files they
// name shown below dir in the sandbox cfg describes:
//
//   - dald's socket (when socket is set) at dir/dald.sock;
//   - the session's token as a file, dir/session-token
//     (DAL_SESSION_TOKEN_FILE), instead of DAL_SESSION_TOKEN: it stays
//     the session's capability, readable by the agent and nobody else's;
//   - the clock log's default path (unless userClock: --clock-out, kept
//     as it is), written after the agent exits and never seen by it,
//     reads dir/clock.json.
//
// The token file is written in cfg.Staging.
func ShowDalFiles(env []string, cfg *sandbox.Config, dir string, socket, userClock bool) ([]string, error) {
	vars := envMap(env)
	set := map[string]string{}
	drop := map[string]bool{}
	if sock := vars[wire.EnvSocket]; sock != "" && socket {
		cfg.SocketsAt = append(cfg.SocketsAt, sandbox.Mount{Source: sock, Target: dir + "/dald.sock"})
		set[wire.EnvSocket] = dir + "/dald.sock"
	}
	if token := vars[wire.EnvToken]; token != "" {
		file, err := writeToken(cfg.Staging, token)
		if err != nil {
			return nil, err
		}
		cfg.Mounts = append(cfg.Mounts, sandbox.Mount{Source: file, Target: dir + "/session-token", ReadOnly: true})
		set[wire.EnvTokenFile] = dir + "/session-token"
		drop[wire.EnvToken] = true
	}
	if _, ok := vars["AGENT_CLOCK_FILE"]; ok && !userClock {
		set["AGENT_CLOCK_FILE"] = dir + "/clock.json"
	}
	return replaceVars(env, set, drop), nil
}

func envMap(env []string) map[string]string {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return vars
}

// replaceVars sets the variables of set in env, in place, new names last
// and sorted (the order is the agent's too), and leaves out those of drop.
func replaceVars(env []string, set map[string]string, drop map[string]bool) []string {
	set = maps.Clone(set)
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
			delete(set, k)
		} else if !drop[k] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+set[k])
	}
	return out
}

// writeToken writes the session token into dal's staging directory (mode
// 0400, created anew, not following a link), for the sandbox to show.
func writeToken(staging, token string) (string, error) {
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return "", fmt.Errorf("create the sandbox staging directory: %w", err)
	}
	p := filepath.Join(staging, "session-token")
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("replace the session token file: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
	if err != nil {
		return "", fmt.Errorf("write the session token file: %w", err)
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the session token file: %w", err)
	}
	return p, nil
}

// HomeFor is the private home of spec's sandboxed agent (see
// [sandbox.Config.HideHome]), whose environment is env and working
// directory dir ("" = dal-exec's): the caller's home and /root hidden but
// for the allow-list, the toolchains on the agent's PATH, spec.ReadOnly
// and spec.Writable, and need (dal's own files the agent uses: the shims,
// dal-exec); dal's key directory, $DAL_KEY and spec.Secrets never shown.
func HomeFor(spec *Spec, env []string, need []string, dir string) sandbox.Home {
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if self, err := os.Executable(); err == nil {
		need = append(slices.Clone(need), self)
	}
	home, _ := os.UserHomeDir()
	h := sandbox.Home{Dir: home, Path: envMap(env)["PATH"], ReadOnly: spec.ReadOnly, Writable: spec.Writable,
		Need: need, Workdir: dir, Secrets: slices.Clone(spec.Secrets)}
	if d, err := os.UserConfigDir(); err == nil {
		h.Secrets = append(h.Secrets, filepath.Join(d, "dal"))
	}
	if k := os.Getenv("DAL_KEY"); k != "" {
		if abs, err := filepath.Abs(k); err == nil {
			h.Secrets = append(h.Secrets, abs)
		}
	}
	return h
}
