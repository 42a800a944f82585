package record

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/boundary"
	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/leftover"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/marks/rundir"
	"github.com/dal-runtime/dal/internal/netcap"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/shim"
	"github.com/dal-runtime/dal/internal/termsafe"
	"github.com/dal-runtime/dal/internal/version"
)

// Options configure a recording.
type Options struct {
	Spec      runner.Spec // the run, as for dal-exec run; Stdout/Stderr are the user's
	Out       string      // bundle path: a directory, or .tgz / .tar.zst to pack
	Workspace string      // the directory the agent works in (default: the current one)
	NoApply   bool        // keep the run's changes only in the bundle
	// MaxApplyBytes caps the file data applied to the workspace (0: no
	// cap): a run whose changes hold more is kept in the bundle only.
	MaxApplyBytes int64
	SelfContained bool   // also store the pre-run workspace
	KeyPath       string // signing key ("" = bundle.DefaultKeyPath)
	// SecretEnv names kept variables that are secrets although their
	// names do not say so (--secret-env); see secrets.go.
	SecretEnv []string
	// Network configures the capture of the agent's network traffic
	// (every mode but default, whose network is passthrough).
	Network NetworkOptions
	// Iterations is the best-of-iterations policy (zero: the default).
	Iterations iterate.Policy
	// Checkpoints, when set, is called once the agent has exited (also
	// when it failed or the recording then fails) with the marks
	// directory, whose checkpoint marks it stores, and the run's facts.
	Checkpoints func(marksDir string, run Finished)

	// CheckpointCalls has the proxy write a checkpoint mark before it
	// forwards each request (--auto-checkpoint before_external_call) into
	// Finished.AutoMarks; EnforceStrictLLM has it answer LLM calls that
	// are not reproducible live with 400 (--enforce-strict-llm). See
	// autocheckpoint.go and strictllm.go.
	CheckpointCalls, EnforceStrictLLM bool

	// Rerun, set by a live replay only (package replay), makes the
	// recording a re-execution of a bundle.
	Rerun *Rerun

	// Policy is the policy gate (policy.go); its zero value is none.
	Policy Policy
}

// Rerun is what a live re-execution of a bundle (dal-exec replay --live)
// changes in a recording: the workspace's lower layers (the recorded
// pre-run state), the agent's directory relative to the workspace, and a
// step before the commit that compares the staged bundle in dir with the
// original and fills m's replay_status.
type Rerun struct {
	Lower        []string
	Cwd          string
	BeforeCommit func(dir string, m *bundle.Manifest) error
}

// Finished describes an agent run that has ended, for the checkpoint store.
type Finished struct {
	Workspace         string
	Bundle            string
	Started, Finished time.Time
	Failed            bool
	// AutoMarks is the marks directory dal itself wrote during the run
	// (before_external_call checkpoints), "" when none.
	AutoMarks string
}

// Summary is what a recording produced.
type Summary struct {
	ExitCode int
	Bundle   string
	Changes  int
	Applied  bool
	Boundary *boundary.Boundary
	// Exchanges is the number of network exchanges recorded; Blocked the
	// connections around the proxy that were refused.
	Exchanges, Blocked int
	// Iterations is the selection among the agent's iterations, nil when
	// it marked none.
	Iterations *iterate.Selection
}

// Record runs the agent in a sandbox and writes the bundle. The bundle is
// published only when complete; the workspace is changed only after it is,
// and only without NoApply.
func Record(ctx context.Context, o Options) (*Summary, error) {
	sum, err := record(ctx, o)
	// Only before the bundle is published is "untouched" true: a failed
	// apply says itself what state the workspace is in.
	if errors.Is(err, syscall.ENOSPC) && sum == nil {
		err = fmt.Errorf("the disk is full (%w): free space where --out and the sandbox staging live (%s), or choose another --out; no bundle was written and the workspace is untouched", err, stagingRoot())
	}
	return sum, err
}

// recording is one record in progress: what each step produced for the
// next. The steps run in the order record calls them; each owns the fields
// it sets.
type recording struct {
	o     Options
	spec  runner.Spec
	ws    string // the workspace, absolute, symlinks resolved
	cwd   string // the agent's directory, relative to ws
	out   string // the bundle's absolute path
	key   ed25519.PrivateKey
	w     *bundle.Writer
	stage string // dal's staging directory: sandbox layers, network, marks, apply copy
	held  *leftover.Held
	cfg   sandbox.Config
	nw    *Network // nil in default mode (passthrough)
	// captureErr: the run's file changes could not be captured
	// (captureOrKeep); the bundle is committed as incomplete.
	captureErr error
	// tooMuch: the run's changes hold more file data than may be
	// applied (checkApplySize); the workspace is left as it was.
	tooMuch error
	netw    *networkWrite // network.har and prompts/ being written, from run to writeRecords
	marks   string        // the marks directory, as dal-exec sees it
	auto    string        // dal's own marks directory (autocheckpoint.go), "" when none
	logs    *runLogs
	gate    *policy.Gate // the policy gate (policy.go), nil without --policy

	started time.Time
	res     *runner.Result
	its     *rundir.Iterations
	changes []sandbox.Change
	env     *RunEnv
	bound   *boundary.Boundary
}

// record is the sequence of named steps; each returns an error that the
// user reads as one sentence. Until commit, nothing outside the staging
// directories is written: an error leaves no bundle and the workspace
// untouched.
func record(ctx context.Context, o Options) (*Summary, error) {
	r, err := prepareRecording(o)
	if err != nil {
		return nil, err
	}
	defer r.cleanup()
	steps := []func() error{
		r.startPolicy,
		r.buildSandbox,
		r.gatePolicy,
		r.openLogs,
		func() error { return r.run(ctx) },
		r.selectIterations,
		r.captureOrKeep,
		r.writePolicy,
		r.writeRecords,
		r.commit,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	sum, err := r.apply()
	if err == nil && r.captureErr != nil {
		err = fmt.Errorf("%w: the bundle %s is written and signed as incomplete (its network.har, policy.json and logs are kept) and the workspace is untouched", r.captureErr, r.out)
	}
	return sum, err
}

// prepareRecording resolves the workspace, --out and the signing key, and
// creates the bundle writer and the staging directory.
func prepareRecording(o Options) (*recording, error) {
	r := &recording{o: o, spec: o.Spec}
	var err error
	if r.ws, r.cwd, err = workspaceAndCwd(o.Workspace); err != nil {
		return nil, err
	}
	if o.Rerun != nil {
		r.cwd = o.Rerun.Cwd
	}
	if r.out, err = filepath.Abs(o.Out); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(r.out); err == nil {
		return nil, runner.UsageError{Err: fmt.Errorf("%s already exists: choose another --out or remove it", o.Out)}
	}
	if err := sandbox.Outside(); err != nil {
		return nil, runner.UsageError{Err: err}
	}
	// --out runs/2026/v1.2 creates runs/2026, as mkdir -p would.
	if err := os.MkdirAll(filepath.Dir(r.out), 0o755); err != nil {
		return nil, runner.UsageError{Err: fmt.Errorf("--out %s: its directory cannot be created (%v): choose another --out", o.Out, err)}
	}
	keyPath := o.KeyPath
	if keyPath == "" {
		keyPath = bundle.DefaultKeyPath()
	}
	key, created, err := bundle.LoadOrCreateKey(keyPath)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if created {
		fmt.Fprintf(r.spec.Log, "dal: created a signing key at %s (keep it; bundles are signed with it)\n", keyPath)
	}
	r.key = key
	if abs, err := filepath.Abs(keyPath); err == nil {
		r.spec.Secrets = append(r.spec.Secrets, abs) // the agent never sees it
	}
	// An archive --out is packed by Commit itself, atomically.
	if r.w, err = bundle.Create(r.out); err != nil {
		return nil, err
	}
	if r.stage, r.held, err = NewStage("dal-sandbox-"); err != nil {
		r.w.Abort()
		return nil, err
	}
	return r, nil
}

// NewStage sweeps the staging directories that dead runs (records and
// replays) left behind and creates this run's, named with prefix and held
// (leftover.Hold) so that no other run sweeps it. The caller removes it
// and releases the hold.
func NewStage(prefix string) (string, *leftover.Held, error) {
	// Silently: another run's kill is not this run's news.
	for _, p := range []string{"dal-sandbox-*", "dal-replay-*"} {
		leftover.Sweep(stagingRoot(), p)
	}
	stage, err := os.MkdirTemp(stagingRoot(), prefix)
	if err != nil {
		return "", nil, fmt.Errorf("create the sandbox's staging directory: %w", err)
	}
	held, err := leftover.Hold(stage)
	if err != nil {
		os.RemoveAll(stage)
		return "", nil, err
	}
	return stage, held, nil
}

// cleanup removes the staging directory and, unless the bundle was
// committed, the bundle's own staging.
func (r *recording) cleanup() {
	if r.gate != nil {
		r.gate.Close()
	}
	if r.logs != nil {
		r.logs.close()
	}
	if r.netw != nil {
		r.netw.wait() // before the staging goes: it writes there
	}
	if r.w != nil {
		r.w.Abort() // a no-op after Commit
	}
	os.RemoveAll(r.stage)
	r.held.Release()
}

// buildSandbox configures the sandbox: the workspace overlay, the network
// capture (every mode but default), the marks directory and the agent's
// own files under /tmp.
func (r *recording) buildSandbox() error {
	r.cfg = SandboxConfig(r.ws, filepath.Join(r.stage, "sandbox"))
	if r.o.Rerun != nil {
		r.cfg.Lower = r.o.Rerun.Lower
	}
	if r.spec.Mode != "default" {
		nopts := r.o.Network
		nopts.SecretValues = keptSecretValues(r.spec.KeepEnv, r.o.SecretEnv)
		nopts.Before = append(append([]func(context.Context, *har.Exchange) *netcap.Answer{}, nopts.Before...), r.ownHooks()...)
		nw, err := NewNetwork(filepath.Join(r.stage, "net"), nopts, nil, nil, r.spec.Log)
		if err != nil {
			return fmt.Errorf("network capture: %w", err)
		}
		r.nw = nw
		nw.Configure(&r.cfg)
		r.spec.Env = withVars(r.spec.Env, nw.Vars())
	}
	marksDir, marksMount, err := rundir.ForSandbox(r.stage)
	if err != nil {
		return err
	}
	r.marks = marksDir
	r.cfg.Mounts = append(r.cfg.Mounts, marksMount)
	r.spec.Env = withVars(r.spec.Env, rundir.Vars(marks.SandboxDir, r.ws))
	r.spec.Dir = filepath.Join(r.ws, r.cwd)
	r.cfg.Mounts = append(r.cfg.Mounts, ArgMounts(r.spec.Args, r.spec.Dir, r.ws)...)
	// dal-exec forks the sandbox init, which execs (1) and starts the agent,
	// which execs (2): counting starts there.
	r.spec.TraceFromExec = 2
	r.cfg.Virtual = runner.VirtualConfig(&r.spec)
	WrapInSandbox(&r.spec, &r.cfg)
	return nil
}

// WrapInSandbox has the runner start spec's agent in the sandbox cfg
// describes, once cfg is complete: the dald socket the runner passes is
// shown as that one file at a fixed path, dal's own variables read the
// same in every run (sandboxenv.go), and the directory of spec.ClockOut
// (when set) is bound writable. cfg must outlive the run.
func WrapInSandbox(spec *runner.Spec, cfg *sandbox.Config) {
	clockOut := spec.ClockOut
	spec.Wrap = func(argv, env []string, dir string) (runner.Wrapped, error) {
		env, err := sandboxEnv(env, cfg, clockOut != "")
		if err != nil {
			return runner.Wrapped{}, err
		}
		if clockOut != "" {
			cfg.Binds = append(cfg.Binds, filepath.Dir(clockOut))
		}
		if err := cfg.HideHome(runner.HomeFor(spec, env, nil, dir)); err != nil {
			return runner.Wrapped{}, runner.UsageError{Err: err}
		}
		cfg.Limits = spec.Limits
		c, err := sandbox.Command(*cfg, argv, env, dir)
		if err != nil {
			return runner.Wrapped{}, err
		}
		return runner.Wrapped{Cmd: c.Cmd, Wait: c.Wait, Close: c.Close, Ended: c.Ended, Threads: c.ThreadsDuring}, nil
	}
}

// openLogs creates the bundle's logs/ and tees the agent's output and
// dal's messages into it.
func (r *recording) openLogs() error {
	logs, err := createLogs(filepath.Join(r.w.Dir(), "logs"))
	if err != nil {
		return err
	}
	r.logs = logs
	r.spec.Stdout = io.MultiWriter(r.spec.Stdout, logs.stdout)
	r.spec.Stderr = io.MultiWriter(r.spec.Stderr, logs.stderr)
	r.spec.Log = io.MultiWriter(r.spec.Log, logs.dal)
	return nil
}

// run runs the agent, stores its checkpoint marks, stops the proxy (also
// when the run failed: no goroutine outlives it) and starts writing the
// network records (netwrite.go; writeRecords waits for them).
func (r *recording) run(ctx context.Context) error {
	r.started = time.Now()
	res, err := runner.Run(ctx, r.spec)
	r.res = res
	if r.o.Checkpoints != nil {
		r.o.Checkpoints(r.marks, Finished{Workspace: r.ws, Bundle: r.out, Started: r.started, Finished: time.Now(),
			Failed: err != nil || res == nil || res.ExitCode != 0 || res.TimedOut, AutoMarks: r.auto})
	}
	if r.nw != nil {
		blocked, berr := sandbox.Blocked(r.cfg)
		xs := r.nw.Finish(blocked)
		if err == nil && berr != nil {
			err = berr
		}
		if err == nil {
			r.netw = startNetworkWrite(r.w.Dir(), r.nw, xs)
		}
	}
	return err
}

// selectIterations judges the agent's iterations; the selected one's
// artifacts become the run's output before the capture, so the bundle,
// apply and revert all see them.
func (r *recording) selectIterations() error {
	policy := r.o.Iterations
	if policy.Use == "" {
		policy = iterate.DefaultPolicy()
	}
	its, err := rundir.Select(r.marks, policy)
	if err != nil {
		return fmt.Errorf("the agent's iterations: %w", err)
	}
	if its == nil {
		return nil
	}
	r.its = its
	if err := its.Apply(rundir.PlaceIn(r.cfg)); err != nil {
		return err
	}
	return its.Preserve(filepath.Join(r.w.Dir(), "iterations"))
}

// capture reads the run's file changes from the capture layer and exports
// them into the bundle (fs-diff/, fs-pre/) and, unless --no-apply, into a
// copy of dal's own that apply works from (hard links, cheap: the bundle's
// staging is gone once published).
func (r *recording) capture() error {
	changes, uncaptured, err := sandbox.CaptureAll(r.cfg)
	if err != nil {
		return fmt.Errorf("capture the run's file changes: %w", err)
	}
	r.changes = dropOwn(changes, excluded(r.ws, r.out))
	denied, err := sandbox.Denied(r.cfg)
	if err != nil {
		return err
	}
	r.reportCapture(uncaptured, denied)
	if err := sandbox.Export(r.cfg, r.changes, filepath.Join(r.w.Dir(), "fs-diff"), filepath.Join(r.w.Dir(), "fs-pre")); err != nil {
		return fmt.Errorf("store the run's file changes: %w", err)
	}
	if !r.o.NoApply {
		if err := sandbox.Export(r.cfg, r.changes, filepath.Join(r.applyDir(), "fs-diff"), filepath.Join(r.applyDir(), "fs-pre")); err != nil {
			return fmt.Errorf("prepare the run's changes: %w", err)
		}
		if err := r.checkApplySize(); err != nil {
			return err
		}
	}
	r.setEnv(uncaptured, denied)
	return nil
}

// setEnv fills env.json's record of the run.
func (r *recording) setEnv(uncaptured []sandbox.Uncaptured, denied []sandbox.DeniedWrite) {
	r.env = newRunEnv(&r.spec, r.res, r.ws, r.cwd, r.started, r.o.SecretEnv)
	r.env.DeniedWrites = deniedWrites(denied)
	r.env.Uncaptured = uncaptured
	r.env.SelfContained = r.o.SelfContained
	r.env.Applied = !r.o.NoApply && r.tooMuch == nil && r.captureErr == nil
	if r.nw != nil {
		r.env.Network = &r.nw.env
	}
}

// clipMiddle is s cut to about n bytes by an ellipsis in its middle.
func clipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := s[:n/2], s[len(s)-n/2:]
	return strings.ToValidUTF8(head, "") + " … " + strings.ToValidUTF8(tail, "")
}

// captureOrKeep captures the run's file changes; when that fails (a path
// nested past PATH_MAX, a full disk, a file that vanished) the run's
// other records (network.har, policy.json, logs) are not thrown away with
// them: the partial copies are removed, the change list is left empty,
// the failure is noted for the manifest's dal.incomplete, and the bundle
// is committed as incomplete, never applied. A run could otherwise erase
// its own audit record by making its changes uncapturable.
func (r *recording) captureOrKeep() error {
	err := r.capture()
	if err == nil {
		return nil
	}
	// What the agent controls (its paths) is cut to a readable length.
	r.captureErr = errors.New(clipMiddle(err.Error(), 400))
	for _, d := range []string{filepath.Join(r.w.Dir(), "fs-diff"), filepath.Join(r.w.Dir(), "fs-pre"), r.applyDir()} {
		if rerr := os.RemoveAll(d); rerr != nil {
			return fmt.Errorf("%w (and removing its partial copy failed: %v)", err, rerr)
		}
	}
	r.changes = nil
	if err := os.MkdirAll(filepath.Join(r.w.Dir(), "fs-diff"), 0o755); err != nil {
		return err
	}
	if err := sandbox.WriteChanges(filepath.Join(r.w.Dir(), "fs-diff", "changes.json"), nil); err != nil {
		return err
	}
	r.setEnv(nil, nil)
	return nil
}

// reportCapture says on dal's log what the capture left out or changed:
// fifos, sockets and devices, privilege bits, and the calls and writes
// the sandbox refused.
func (r *recording) reportCapture(uncaptured []sandbox.Uncaptured, denied []sandbox.DeniedWrite) {
	for _, u := range uncaptured {
		fmt.Fprintf(r.spec.Log, "dal: the agent made a %s at %s: not captured (a bundle holds files, directories and symlinks only)\n", u.Kind, termsafe.Line(u.Path))
	}
	for _, c := range r.changes {
		if len(c.Stripped) > 0 {
			fmt.Fprintf(r.spec.Log, "dal: %s had %s, removed: a run's output never carries privileges\n", termsafe.Line(c.Path), strings.Join(c.Stripped, " and "))
		}
	}
	for _, d := range denied {
		if d.Path == "" { // a refused call, e.g. io_uring_setup
			fmt.Fprintf(r.spec.Log, "dal: the agent called %s, which the sandbox refuses\n", d.Op)
			continue
		}
		fmt.Fprintf(r.spec.Log, "dal: the agent tried to write outside the workspace (%s %s): refused, read-only\n", d.Op, termsafe.Line(d.Path))
	}
}

func (r *recording) applyDir() string { return filepath.Join(r.stage, "apply") }

// writeRecords writes the rest of the bundle, once network.har and
// prompts/ are: the pre-run workspace when self-contained, env.json,
// clock.json, syscalls.json (reported on dal's log) and the iteration
// report.
func (r *recording) writeRecords() error {
	if r.netw != nil {
		if err := r.netw.wait(); err != nil {
			return err
		}
	}
	if err := r.scrub(); err != nil {
		return err
	}
	if r.o.SelfContained {
		if err := copyWorkspace(r.ws, r.w.Dir(), "workspace", excluded(r.ws, r.out)); err != nil {
			return fmt.Errorf("store the pre-run workspace: %w", err)
		}
	}
	if err := r.w.WriteJSON("env.json", r.env); err != nil {
		return err
	}
	if err := r.w.WriteJSON("clock.json", r.res.Clock); err != nil {
		return err
	}
	in := boundaryInput{trace: r.res.Trace, clock: r.res.Clock, mode: r.spec.Mode, network: r.env.Network,
		exchanges: r.exchanges(), daldSocket: r.res.Env["DAL_SOCKET"], virtCfg: r.cfg.Virtual,
		workspace: r.cfg.Workspace, privateTmp: r.cfg.PrivateTmp}
	if c, ok, err := sandbox.Virtualized(r.cfg); err != nil {
		return err
	} else if ok {
		in.virt = &c
	}
	r.bound = newBoundary(in)
	if err := r.w.WriteJSON("syscalls.json", r.bound); err != nil {
		return err
	}
	reportBoundary(r.spec.Log, r.bound)
	if err := r.lintLLM(); err != nil {
		return err
	}
	if err := r.writeProv(); err != nil {
		return fmt.Errorf("write %s: %w", ProvFile, err)
	}
	if r.its != nil {
		r.its.Report(r.spec.Log, "iterations/selection-report.md in "+r.out)
	}
	return nil
}

// scrub replaces the values of the run's secrets in every file of the
// bundle written so far (logs, fs-diff, network.har, prompts/,
// iterations/); fs-pre/ holds the user's own pre-run files, which revert
// must restore exactly, and is left alone. The list goes to env.json.
func (r *recording) scrub() error {
	values := secretValues(r.res, r.env.Secrets)
	for i, v := range values {
		if len(v) < minSecret && v != "" {
			fmt.Fprintf(r.spec.Log, "dal: the secret %s is shorter than %d bytes and is not scrubbed by value\n", r.env.Secrets[i], minSecret)
		}
	}
	s := NewScrubber(values)
	scrubbed, err := s.tree(r.w.Dir(), "fs-pre")
	if err != nil {
		return err
	}
	// env.json itself: a plain setting may hold a secret's value.
	for _, m := range []map[string]string{r.env.KeptValues, r.env.Inherited} {
		for k, v := range m {
			if b, hit := s.Bytes([]byte(v)); hit {
				m[k] = string(b)
				scrubbed = append(scrubbed, "env.json")
			}
		}
	}
	r.env.Scrubbed = scrubbed
	if len(scrubbed) > 0 {
		fmt.Fprintf(r.spec.Log, "dal: a secret's value was replaced by %s in %s\n", Redacted, strings.Join(scrubbed, ", "))
	}
	return nil
}

func (r *recording) exchanges() int {
	if r.nw == nil {
		return 0
	}
	return r.nw.count
}

// commit builds the manifest, signs it and publishes the bundle.
func (r *recording) commit() error {
	m, err := snapshot(r.env, r.changes, r.logs.stdoutPath)
	if err != nil {
		return err
	}
	if r.nw != nil {
		addPrompts(m, r.nw.prompts)
	}
	if r.its != nil {
		m.Metrics.Iterations = int64(len(r.its.Selection.Iterations))
	}
	policyManifest(m, r.gate)
	if r.captureErr != nil {
		m.Dal.Incomplete = []string{"the run's file changes (fs-diff/, fs-pre/) could not be captured: " + r.captureErr.Error()}
	}
	if err := r.logs.close(); err != nil {
		return err
	}
	if r.o.Rerun != nil {
		if err := r.o.Rerun.BeforeCommit(r.w.Dir(), m); err != nil {
			return err
		}
	}
	if err := r.w.Commit(m, r.key); err != nil {
		return err
	}
	r.w = nil
	return nil
}

// checkApplySize sets tooMuch when the run's changes hold more file data
// than MaxApplyBytes, or than the workspace's filesystem has free: they
// are then kept in the bundle only, and the workspace is not touched.
func (r *recording) checkApplySize() error {
	n, err := sandbox.DataBytes(filepath.Join(r.applyDir(), "fs-diff"), r.changes, true)
	if err != nil {
		return fmt.Errorf("prepare the run's changes: %w", err)
	}
	r.tooMuch = sandbox.CheckDataBytes(r.ws, n, r.o.MaxApplyBytes, "the run's changes", "kept in the bundle "+r.out+" only")
	return nil
}

// apply changes the workspace as the run left it (unless --no-apply). The
// bundle is published by now: a failure here names it.
func (r *recording) apply() (*Summary, error) {
	sum := &Summary{ExitCode: r.res.ExitCode, Bundle: r.out, Changes: len(r.changes), Boundary: r.bound, Exchanges: r.exchanges()}
	if r.env.Network != nil {
		sum.Blocked = len(r.env.Network.Blocked)
	}
	if r.its != nil {
		sum.Iterations = r.its.Selection
	}
	if r.o.NoApply || len(r.changes) == 0 || r.captureErr != nil {
		return sum, nil
	}
	if r.tooMuch != nil {
		return sum, r.tooMuch
	}
	if err := sandbox.Apply(r.ws, filepath.Join(r.applyDir(), "fs-diff"), r.changes); err != nil {
		return sum, fmt.Errorf("%w (the bundle %s holds them)", err, r.out)
	}
	sum.Applied = true
	return sum, nil
}

// runLogs are the bundle's logs/ files while the agent runs.
type runLogs struct {
	stdout, stderr, dal *os.File
	stdoutPath          string
	closed              bool
}

func createLogs(dir string) (*runLogs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &runLogs{stdoutPath: filepath.Join(dir, "stdout")}
	for _, f := range []struct {
		name string
		to   **os.File
	}{{"stdout", &l.stdout}, {"stderr", &l.stderr}, {"dal.log", &l.dal}} {
		// O_APPEND: the secret scrub rewrites dal.log while it is open.
		fh, err := os.OpenFile(filepath.Join(dir, f.name), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			l.close()
			return nil, err
		}
		*f.to = fh
	}
	return l, nil
}

// close closes the files once, returning the first error.
func (l *runLogs) close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	var first error
	for _, f := range []*os.File{l.stdout, l.stderr, l.dal} {
		if f == nil {
			continue
		}
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// workspaceAndCwd resolves the workspace and the current directory within it.
func workspaceAndCwd(ws string) (string, string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	if ws == "" {
		ws = wd
	}
	ws, err = filepath.Abs(ws)
	if err != nil {
		return "", "", err
	}
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		return "", "", runner.UsageError{Err: fmt.Errorf("workspace %s does not exist: pass an existing directory to --workspace", ws)}
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return "", "", runner.UsageError{Err: fmt.Errorf("workspace %s is not a directory", ws)}
	}
	real, _ := filepath.EvalSymlinks(wd)
	rel, err := filepath.Rel(ws, real)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ws, ".", nil
	}
	return ws, rel, nil
}

// excluded lists the paths inside the workspace that are dal's own output.
func excluded(ws string, paths ...string) []string {
	var out []string
	for _, p := range paths {
		if rel, err := filepath.Rel(ws, p); err == nil && !strings.HasPrefix(rel, "..") {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// dropOwn removes dal's own output (the bundle being written inside the
// workspace) from the captured changes. The agent never writes there; this
// only matters if it lists the workspace.
func dropOwn(changes []sandbox.Change, own []string) []sandbox.Change {
	if len(own) == 0 {
		return changes
	}
	out := changes[:0]
	for _, c := range changes {
		mine := false
		for _, o := range own {
			mine = mine || c.Path == o || strings.HasPrefix(c.Path, o+"/")
		}
		if !mine {
			out = append(out, c)
		}
	}
	return out
}

// copyWorkspace stores the pre-run workspace ws as the directory name of
// the bundle directory dir, leaving out dal's own output in it (skip: slash
// paths relative to ws, and the writer's .<out>.partial-* staging).
func copyWorkspace(ws, dir, name string, skip []string) error {
	src, err := safefs.Open(ws)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := safefs.OpenOneMount(dir)
	if err != nil {
		return err
	}
	defer dst.Close()
	return safefs.Copy(src, ".", dst, name, func(rel string) bool {
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") || strings.HasPrefix(path.Base(rel), "."+path.Base(s)+".partial") {
				return true
			}
		}
		return false
	})
}

// snapshot builds the manifest's execution snapshot from the run.
func snapshot(env *RunEnv, changes []sandbox.Change, stdoutPath string) (*bundle.Manifest, error) {
	out, err := os.ReadFile(stdoutPath)
	if err != nil {
		return nil, err
	}
	cmdline := strings.Join(env.Command, " ")
	seed := env.Seed
	m := &bundle.Manifest{
		WorkflowID: cmdline,
		Config: bundle.Config{Model: bundle.Model{ID: bundle.ModelNone}, ExecutionMode: env.Mode, Seed: &seed,
			Agent: &bundle.Agent{Name: filepath.Base(env.Command[0])}},
		Inputs:  bundle.Inputs{UserPrompt: cmdline, UserPromptHash: digest.Bytes([]byte(cmdline)), Environment: map[string]string{}},
		Outputs: bundle.Outputs{ResponseHash: digest.Bytes(out)},
		Metrics: &bundle.Metrics{DurationMS: env.DurationMS},
		Dal:     bundle.DalSection{CreatedBy: "dal " + version.Version},
	}
	const maxResponse = 64 << 10
	if len(out) <= maxResponse && utf8.Valid(out) {
		m.Outputs.Response = string(out)
	}
	for k, v := range env.GuardRails {
		if !volatile[k] {
			m.Inputs.Environment[k] = v
		}
	}
	for k, v := range env.Inherited {
		m.Inputs.Environment[k] = v
	}
	for _, c := range changes {
		if c.Kind != sandbox.KindFile {
			continue
		}
		a := bundle.Artifact{Path: c.Path, Operation: c.Op}
		if c.Op != sandbox.OpDeleted {
			a.Hash = c.Hash
		}
		m.Outputs.ArtifactsCreated = append(m.Outputs.ArtifactsCreated, a)
		if c.Op != sandbox.OpCreated {
			pre := c.Entry()
			if c.Pre != nil {
				pre = *c.Pre
			}
			m.Inputs.ContextFiles = append(m.Inputs.ContextFiles, bundle.ContextFile{Path: c.Path, Hash: pre.Hash, SizeBytes: pre.Size})
		}
	}
	return m, nil
}

// stagingRoot is where sandbox layers live: on a disk, not in memory, since
// the capture holds everything the agent writes.
func stagingRoot() string {
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
		return "/var/tmp"
	}
	return os.TempDir()
}

// SandboxConfig is the sandbox every record and replay runs in: the
// workspace ws as the overlay with its layers in staging, a private /tmp,
// and the runtime shims reachable even when they were installed under the
// real /tmp.
func SandboxConfig(ws, staging string) sandbox.Config {
	cfg := sandbox.Config{Workspace: ws, Staging: staging, PrivateTmp: true}
	if shims, err := shim.Install(); err == nil {
		// Python may try to cache bytecode beside the shim: not a write
		// of the agent's.
		cfg.Quiet = append(cfg.Quiet, string(shims))
		if hiddenInSandbox(string(shims)) {
			cfg.Binds = append(cfg.Binds, string(shims))
		}
	}
	// The agent may call dal-exec itself (dal-exec iteration, checkpoint
	// save): keep it reachable when it lives under the hidden /tmp.
	if self, err := os.Executable(); err == nil && hiddenInSandbox(self) {
		cfg.Binds = append(cfg.Binds, self)
	}
	return cfg
}

// hiddenInSandbox reports whether the absolute path p is in a directory
// the sandbox replaces with a private one (/tmp, /var/tmp, /run...), in
// the system's temporary directory or in a home it hides ($HOME, /root):
// what dal needs from there (the shims under ~/.cache, the agent's script
// in /tmp) is bound in.
func hiddenInSandbox(p string) bool {
	home, _ := os.UserHomeDir()
	return sandbox.UnderPrivateDir(p) || strings.HasPrefix(p, filepath.Clean(os.TempDir())+"/") ||
		strings.HasPrefix(p, "/root/") || (home != "" && strings.HasPrefix(p, filepath.Clean(home)+"/"))
}

// withVars returns env with vars added (a new map when env is nil).
func withVars(env map[string]string, vars map[string]string) map[string]string {
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range vars {
		env[k] = v
	}
	return env
}

// ArgMounts keeps the agent's own files readable when its command names
// them under the system's temporary directory or another directory the
// sandbox replaces with a private one (/var/tmp, /run): the directory of each such file (outside the
// workspace) is shown read-only at the same path, e.g. for
// `dal-exec record -- python3 /tmp/scripts/agent.py`.
func ArgMounts(argv []string, dir, ws string) []sandbox.Mount {
	seen := map[string]bool{}
	var out []sandbox.Mount
	for _, a := range argv {
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		p = filepath.Clean(p)
		if !hiddenInSandbox(p) || p == ws || strings.HasPrefix(p, ws+"/") {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		d := filepath.Dir(p)
		if d == filepath.Clean(os.TempDir()) || sandbox.UnderPrivateDir(d) && !sandbox.UnderPrivateDir(filepath.Dir(d)) {
			d = p // a file right in /tmp (or /var/tmp...): only the file itself
		}
		if seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, sandbox.Mount{Source: d, Target: d, ReadOnly: true})
	}
	return out
}
