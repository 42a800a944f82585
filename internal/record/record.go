package record

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/shim"
	"github.com/dal-runtime/dal/internal/version"
)

// Options configure a recording.
type Options struct {
	Spec          runner.Spec // the run, as for dal-exec run; Stdout/Stderr are the user's
	Out           string      // bundle path: a directory, or .tgz / .tar.zst to pack
	Workspace     string      // the directory the agent works in (default: the current one)
	NoApply       bool        // keep the run's changes only in the bundle
	SelfContained bool        // also store the pre-run workspace
	KeyPath       string      // signing key ("" = bundle.DefaultKeyPath)
	// Network configures the capture of the agent's network traffic
	// (every mode but default, whose network is passthrough).
	Network NetworkOptions
	// Iterations is the best-of-iterations policy (zero: the default).
	Iterations iterate.Policy
	// Checkpoints, when set, is called once the agent has exited (also
	// when it failed or the recording then fails) with the marks
	// directory, whose checkpoint marks it stores, and the run's facts.
	Checkpoints func(marksDir string, run Finished)
}

// Finished describes an agent run that has ended, for the checkpoint store.
type Finished struct {
	Workspace         string
	Bundle            string
	Started, Finished time.Time
	Failed            bool
}

// Summary is what a recording produced.
type Summary struct {
	ExitCode int
	Bundle   string
	Changes  int
	Applied  bool
	Boundary *Boundary
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
	if errors.Is(err, syscall.ENOSPC) && (sum == nil || !sum.Applied) {
		err = fmt.Errorf("the disk is full (%w): free space where --out and the sandbox staging live (%s), or choose another --out; no bundle was written and the workspace is untouched", err, stagingRoot())
	}
	return sum, err
}

func record(ctx context.Context, o Options) (*Summary, error) {
	spec := o.Spec
	ws, cwd, err := workspaceAndCwd(o.Workspace)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(out); err == nil {
		return nil, runner.UsageError{Err: fmt.Errorf("%s already exists: choose another --out or remove it", o.Out)}
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
		fmt.Fprintf(spec.Log, "dal: created a signing key at %s (keep it; bundles are signed with it)\n", keyPath)
	}

	// An archive --out is packed by Commit itself, atomically.
	w, err := bundle.Create(out)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	stage, err := os.MkdirTemp(stagingRoot(), "dal-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("create the sandbox's staging directory: %w", err)
	}
	defer os.RemoveAll(stage)
	cfg := sandboxConfig(ws, filepath.Join(stage, "sandbox"))
	var nw *network
	if spec.Mode != "default" {
		if nw, err = newNetwork(filepath.Join(stage, "net"), o.Network, nil, nil, spec.Log); err != nil {
			return nil, fmt.Errorf("network capture: %w", err)
		}
		nw.configure(&cfg)
		spec.Env = nw.Vars()
	}
	marksDir, marksMount, err := newMarksDir(stage)
	if err != nil {
		return nil, err
	}
	cfg.Mounts = append(cfg.Mounts, marksMount)
	spec.Env = withVars(spec.Env, marksVars(marks.SandboxDir, ws))
	policy := o.Iterations
	if policy.Use == "" {
		policy = iterate.DefaultPolicy()
	}
	spec.Dir = filepath.Join(ws, cwd)
	cfg.Mounts = append(cfg.Mounts, argMounts(spec.Args, spec.Dir, ws)...)
	// dal-exec forks the sandbox init, which execs (1) and starts the agent,
	// which execs (2): counting starts there.
	spec.TraceFromExec = 2
	spec.Wrap = func(argv, env []string, dir string) (*exec.Cmd, error) {
		cfg.Binds = append(cfg.Binds, socketDir(env)...)
		if spec.ClockOut != "" {
			cfg.Binds = append(cfg.Binds, filepath.Dir(spec.ClockOut))
		}
		return sandbox.Command(cfg, argv, env, dir)
	}
	spec.Wait = sandbox.Wait
	logs := filepath.Join(w.Dir(), "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	stdout, err := os.Create(filepath.Join(logs, "stdout"))
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(logs, "stderr"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	dalLog, err := os.Create(filepath.Join(logs, "dal.log"))
	if err != nil {
		return nil, err
	}
	defer dalLog.Close()
	spec.Stdout = io.MultiWriter(spec.Stdout, stdout)
	spec.Stderr = io.MultiWriter(spec.Stderr, stderr)
	spec.Log = io.MultiWriter(spec.Log, dalLog)

	started := time.Now()
	res, err := runner.Run(ctx, spec)
	if o.Checkpoints != nil {
		o.Checkpoints(marksDir, Finished{Workspace: ws, Bundle: out, Started: started, Finished: time.Now(),
			Failed: err != nil || res == nil || res.ExitCode != 0 || res.TimedOut})
	}
	if nw != nil {
		// Stop the proxy even when the run failed: no goroutine outlives it.
		blocked, berr := sandbox.Blocked(cfg)
		xs := nw.finish(blocked)
		if err == nil && berr != nil {
			err = berr
		}
		if err == nil {
			err = writeNetwork(w, nw, xs)
		}
	}
	if err != nil {
		return nil, err
	}
	// The selected iteration's artifacts become the run's output before
	// the capture, so the bundle, apply and revert all see them.
	its, err := selectIterations(marksDir, policy)
	if err != nil {
		return nil, fmt.Errorf("the agent's iterations: %w", err)
	}
	if its != nil {
		if err := its.apply(placeIn(cfg)); err != nil {
			return nil, err
		}
		if err := its.preserve(filepath.Join(w.Dir(), "iterations")); err != nil {
			return nil, err
		}
	}
	changes, err := sandbox.Capture(cfg)
	if err != nil {
		return nil, fmt.Errorf("capture the run's file changes: %w", err)
	}
	changes = dropOwn(changes, excluded(ws, out))
	denied, err := sandbox.Denied(cfg)
	if err != nil {
		return nil, err
	}
	for _, d := range denied {
		fmt.Fprintf(spec.Log, "dal: the agent tried to write outside the workspace (%s %s): refused, read-only\n", d.Op, d.Path)
	}
	if err := sandbox.Export(cfg, changes, filepath.Join(w.Dir(), "fs-diff"), filepath.Join(w.Dir(), "fs-pre")); err != nil {
		return nil, fmt.Errorf("store the run's file changes: %w", err)
	}
	// The workspace is changed from a copy of its own (hard links into the
	// capture layer, cheap): the bundle's staging is gone once published.
	applyDiff := filepath.Join(stage, "apply")
	if !o.NoApply {
		if err := sandbox.Export(cfg, changes, filepath.Join(applyDiff, "fs-diff"), filepath.Join(applyDiff, "fs-pre")); err != nil {
			return nil, fmt.Errorf("prepare the run's changes: %w", err)
		}
	}
	env := newRunEnv(&spec, res, ws, cwd, started)
	env.DeniedWrites = denied
	env.SelfContained = o.SelfContained
	env.Applied = !o.NoApply
	if nw != nil {
		env.Network = &nw.env
	}
	if o.SelfContained {
		if err := copyTree(ws, filepath.Join(w.Dir(), "workspace"), excluded(ws, out)); err != nil {
			return nil, fmt.Errorf("store the pre-run workspace: %w", err)
		}
	}
	if err := w.WriteJSON("env.json", env); err != nil {
		return nil, err
	}
	if err := w.WriteJSON("clock.json", res.Clock); err != nil {
		return nil, err
	}
	exchanges := 0
	if nw != nil {
		exchanges = nw.count
	}
	bound := newBoundary(boundaryInput{trace: res.Trace, clock: res.Clock, mode: spec.Mode, network: env.Network,
		exchanges: exchanges, daldSocket: res.Env["DAL_SOCKET"]})
	if err := w.WriteJSON("syscalls.json", bound); err != nil {
		return nil, err
	}
	reportBoundary(spec.Log, bound)
	m, err := snapshot(env, changes, filepath.Join(logs, "stdout"))
	if err != nil {
		return nil, err
	}
	if nw != nil {
		addPrompts(m, nw.prompts)
	}
	if its != nil {
		m.Metrics.Iterations = int64(len(its.Selection.Iterations))
		its.report(spec.Log, "iterations/selection-report.md in "+out)
	}
	for _, f := range []*os.File{stdout, stderr, dalLog} {
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	if err := w.Commit(m, key); err != nil {
		return nil, err
	}
	committed = true
	sum := &Summary{ExitCode: res.ExitCode, Bundle: out, Changes: len(changes), Boundary: bound, Exchanges: exchanges}
	if env.Network != nil {
		sum.Blocked = len(env.Network.Blocked)
	}
	if its != nil {
		sum.Iterations = its.Selection
	}
	if !o.NoApply && len(changes) > 0 {
		if err := sandbox.Apply(ws, filepath.Join(applyDiff, "fs-diff"), changes); err != nil {
			return sum, fmt.Errorf("%w (the bundle %s holds them)", err, out)
		}
		sum.Applied = true
	}
	return sum, nil
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

// socketDir returns the directory of the dald socket named in env, which
// the sandbox must keep reachable.
func socketDir(env []string) []string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "DAL_SOCKET="); ok && v != "" {
			return []string{filepath.Dir(v)}
		}
	}
	return nil
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

// copyTree copies the regular files, directories and symlinks of src into
// dst, keeping modes, skipping the relative paths in skip.
func copyTree(src, dst string, skip []string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		for _, s := range skip {
			if rel == s || strings.HasPrefix(filepath.ToSlash(rel), s+"/") || strings.HasPrefix(filepath.Base(p), "."+filepath.Base(s)+".partial") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			o, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(o, in); err != nil {
				o.Close()
				return err
			}
			return o.Close()
		}
		return nil // fifos, sockets, devices are not workspace content
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
		Inputs:  bundle.Inputs{UserPrompt: cmdline, UserPromptHash: hashValue(cmdline), Environment: map[string]string{}},
		Outputs: bundle.Outputs{ResponseHash: hashBytes(out)},
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

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// stagingRoot is where sandbox layers live: on a disk, not in memory, since
// the capture holds everything the agent writes.
func stagingRoot() string {
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
		return "/var/tmp"
	}
	return os.TempDir()
}

// sandboxConfig is the sandbox every record and replay runs in: the
// workspace as the overlay, a private /tmp, and the runtime shims reachable
// even when they were installed under the real /tmp.
func sandboxConfig(ws, staging string) sandbox.Config {
	cfg := sandbox.Config{Workspace: ws, Staging: staging, PrivateTmp: true}
	if shims, err := shim.Install(); err == nil {
		// Python may try to cache bytecode beside the shim: not a write
		// of the agent's.
		cfg.Quiet = append(cfg.Quiet, string(shims))
		if strings.HasPrefix(string(shims), filepath.Clean(os.TempDir())+"/") {
			cfg.Binds = append(cfg.Binds, string(shims))
		}
	}
	// The agent may call dal-exec itself (dal-exec iteration, checkpoint
	// save): keep it reachable when it lives under the hidden /tmp.
	if self, err := os.Executable(); err == nil && strings.HasPrefix(self, filepath.Clean(os.TempDir())+"/") {
		cfg.Binds = append(cfg.Binds, self)
	}
	return cfg
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

// argMounts keeps the agent's own files readable when its command names
// them under the system's temporary directory, which the sandbox replaces
// with a private one: the directory of each such file (outside the
// workspace) is shown read-only at the same path, e.g. for
// `dal-exec record -- python3 /tmp/scripts/agent.py`.
func argMounts(argv []string, dir, ws string) []sandbox.Mount {
	tmp := filepath.Clean(os.TempDir()) + "/"
	seen := map[string]bool{}
	var out []sandbox.Mount
	for _, a := range argv {
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		p = filepath.Clean(p)
		if !strings.HasPrefix(p, tmp) || p == ws || strings.HasPrefix(p, ws+"/") {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		d := filepath.Dir(p)
		if d+"/" == tmp {
			d = p // a file right in /tmp: only the file itself
		}
		if seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, sandbox.Mount{Source: d, Target: d, ReadOnly: true})
	}
	return out
}
