package record

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/vclock"
)

// ReplayOptions configure a replay.
type ReplayOptions struct {
	Bundle    string
	Workspace string    // default: the recorded workspace path
	KeyPath   string    // trusted signer's public key ("" = the key the manifest names)
	Log       io.Writer // dal's messages (required)
	Stdout    io.Writer // where the replayed agent's output also goes (nil: nowhere)
	// Speed of network replay: 0 as fast as possible, 1 the recorded
	// chunk timing, 2 twice as fast.
	Speed float64
}

// Verdict is a replay's outcome.
type Verdict struct {
	Bundle     string      `json:"bundle"`
	Fidelity   float64     `json:"fidelity"`
	Exact      bool        `json:"exact"`
	Components []Component `json:"components"`
	State      string      `json:"workspace_state"` // pre-run, post-run or self-contained
	WallMS     int64       `json:"wall_ms"`
	RecordMS   int64       `json:"record_ms"`
	// Served is how many network requests the bundle answered; Misses how
	// many it could not.
	Served int `json:"network_served"`
	Misses int `json:"network_misses"`
}

// Replay re-runs a bundle's command offline in a sandbox built from the
// pre-run workspace state, serving the recorded clock, and compares the
// components of DESIGN §9. The user's workspace is never written.
func Replay(ctx context.Context, o ReplayOptions) (*Verdict, error) {
	var opts bundle.OpenOptions
	if o.KeyPath != "" {
		pub, err := bundle.LoadPublicKey(o.KeyPath)
		if err != nil {
			return nil, err
		}
		opts.TrustedKey = pub
	}
	b, err := bundle.Open(o.Bundle, opts)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var env RunEnv
	if err := b.ReadJSON("env.json", &env); err != nil {
		return nil, err
	}
	if env.Version != EnvVersion {
		return nil, fmt.Errorf("%s: env.json version %d, this dal reads %d: use the dal release that recorded it", o.Bundle, env.Version, EnvVersion)
	}
	clock, err := vclock.ReadFile(b.File("clock.json"))
	if err != nil {
		return nil, err
	}
	changes, err := sandbox.ReadChanges(b.File("fs-diff/changes.json"))
	if err != nil {
		return nil, err
	}
	ws := o.Workspace
	if ws == "" {
		ws = env.Workspace
	}
	if ws, err = filepath.Abs(ws); err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(stagingRoot(), "dal-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	cfg := sandboxConfig(ws, filepath.Join(stage, "sandbox"))
	v := &Verdict{Bundle: o.Bundle, RecordMS: env.DurationMS}
	if _, err := os.Stat(ws); err == nil {
		state, err := sandbox.Restore(ws, b.File("fs-pre"), changes, filepath.Join(stage, "pre-layer"))
		switch {
		case err == nil:
			v.State = state
			if state == "post-run" {
				cfg.Lower = []string{filepath.Join(stage, "pre-layer"), ws}
			}
		case env.SelfContained:
			v.State = "self-contained"
			cfg.Lower = []string{b.File("workspace")}
		default:
			return nil, runner.UsageError{Err: fmt.Errorf("%w; replay needs the workspace at its recorded pre- or post-run state: run dal-exec revert %s, or record with --self-contained", err, o.Bundle)}
		}
	} else if env.SelfContained {
		v.State = "self-contained"
		cfg.Lower = []string{b.File("workspace")}
		// The overlay needs a mount point at the recorded path; it is
		// removed again after the run.
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return nil, fmt.Errorf("create the mount point %s for the self-contained workspace: %w", ws, err)
		}
		defer os.Remove(ws)
	} else {
		return nil, runner.UsageError{Err: fmt.Errorf("the recorded workspace %s does not exist here and %s is not self-contained: pass --workspace, or record with --self-contained", ws, o.Bundle)}
	}

	cfg.Mounts = append(cfg.Mounts, argMounts(env.Command, filepath.Join(ws, env.Cwd), ws)...)
	spec := runner.Spec{Args: env.Command, Dir: filepath.Join(ws, env.Cwd), Mode: env.Mode, Seed: env.Seed,
		Epoch: env.Epoch, Quantum: time.Duration(env.QuantumNS), CPUs: env.CPUs, Replay: clock, Log: o.Log,
		Inherit: env.Inherited}
	for k := range env.Kept {
		spec.KeepEnv = append(spec.KeepEnv, k)
		if hashValue(os.Getenv(k)) != env.Kept[k] {
			fmt.Fprintf(o.Log, "dal: %s differs from the recorded value (only its hash is stored): set it as it was for an exact replay\n", k)
		}
	}
	if env.Timeout != "" {
		spec.Timeout, _ = time.ParseDuration(env.Timeout)
		spec.Timeout *= 2 // a replay serves the network and clock locally; never tighter than the record
	}
	var stdout, stderr bytes.Buffer
	spec.Stdout, spec.Stderr = &stdout, &stderr
	if o.Stdout != nil {
		spec.Stdout = multi(&stdout, o.Stdout)
	}
	// The replay is offline whatever the recording's mode: the agent gets
	// its own network namespace, and only the bundle answers.
	recHAR := &har.Log{}
	var nopts NetworkOptions
	var mirrored []string
	if env.Network != nil {
		nopts.RedactHeaders, nopts.RedactFields = env.Network.RedactHeaders, env.Network.RedactFields
		mirrored = env.Network.Mirrored
	}
	if mirrored == nil {
		mirrored = []string{}
	}
	nopts.Speed = o.Speed
	if b.Has("network.har") {
		if recHAR, err = har.ReadFile(b.File("network.har")); err != nil {
			return nil, err
		}
	}
	nw, err := newNetwork(filepath.Join(stage, "net"), nopts, recHAR, mirrored, o.Log)
	if err != nil {
		return nil, fmt.Errorf("network replay: %w", err)
	}
	nw.configure(&cfg)
	if env.Network != nil {
		spec.Env = nw.Vars()
	}
	marksDir, marksMount, err := newMarksDir(stage)
	if err != nil {
		return nil, err
	}
	cfg.Mounts = append(cfg.Mounts, marksMount)
	spec.Env = withVars(spec.Env, marksVars(marks.SandboxDir, ws))
	policy, err := recordedPolicy(b.File("iterations/selection.json"))
	if err != nil {
		return nil, err
	}
	spec.Wrap = func(argv, envl []string, dir string) (*exec.Cmd, error) {
		cfg.Binds = append(cfg.Binds, socketDir(envl)...)
		return sandbox.Command(cfg, argv, envl, dir)
	}
	spec.Wait = sandbox.Wait
	var drift bytes.Buffer
	spec.Log = multi(&drift, o.Log)
	start := time.Now()
	res, err := runner.Run(ctx, spec)
	blocked, _ := sandbox.Blocked(cfg)
	xs := nw.finish(blocked)
	if err != nil {
		return nil, err
	}
	v.WallMS = time.Since(start).Milliseconds()
	// The recording's selection policy picks among the replay's own
	// iterations, so the replayed output compares with the recorded one.
	its, err := selectIterations(marksDir, policy)
	if err != nil {
		return nil, fmt.Errorf("the agent's iterations: %w", err)
	}
	var gotIts []*marks.Mark
	if its != nil {
		gotIts = its.Marks
		if err := its.apply(placeIn(cfg)); err != nil {
			return nil, err
		}
	}
	recIts, _, err := marks.Read(filepath.Dir(b.File("iterations")), marks.Iteration)
	if err != nil {
		return nil, err
	}
	got, err := sandbox.Capture(cfg)
	if err != nil {
		return nil, err
	}

	recOut, _ := b.ReadFile("logs/stdout")
	recErr, _ := b.ReadFile("logs/stderr")
	v.Components = append(v.Components,
		Component{Name: "exit_code", Compared: true, Match: res.ExitCode == env.ExitCode,
			First: ifNot(res.ExitCode == env.ExitCode, fmt.Sprintf("exit code %d, the recording has %d", res.ExitCode, env.ExitCode))},
		Component{Name: "stdout", Compared: true, Match: bytes.Equal(recOut, stdout.Bytes()), First: FirstLineDiff(recOut, stdout.Bytes())},
		Component{Name: "stderr", Compared: true, Match: bytes.Equal(recErr, stderr.Bytes()), First: FirstLineDiff(recErr, stderr.Bytes())},
		compareFS(changes, got, "recording", "replay"),
		compareClock(clock, res.Clock),
	)
	if len(recIts) > 0 || len(gotIts) > 0 {
		v.Components = append(v.Components, compareIterations(recIts, gotIts, "recording", "replay"))
	}
	v.Misses = len(nw.misses)
	for _, x := range xs {
		if x.Response != nil {
			v.Served++
		}
	}
	v.Served -= v.Misses
	if env.Network != nil {
		v.Components = append(v.Components, compareNetwork(recHAR, nw, xs), comparePrompts(b, nw, xs))
	} else {
		v.Components = append(v.Components, Component{Name: "network"}, Component{Name: "prompts"})
	}
	v.Fidelity = Fidelity(v.Components)
	v.Exact = v.Fidelity == 1
	outcome := bundle.ReplayOutcome{Fidelity: v.Fidelity, Components: map[string]bool{}, Divergences: map[string]string{}, DurationMS: v.WallMS}
	for _, c := range v.Components {
		if c.Compared {
			outcome.Components[c.Name] = c.Match
			if !c.Match {
				outcome.Divergences[c.Name] = c.First
			}
		}
	}
	if err := b.AddReplay(outcome); err != nil {
		fmt.Fprintf(o.Log, "dal: could not store the replay outcome in the bundle: %v\n", err)
	}
	return v, nil
}

func ifNot(ok bool, s string) string {
	if ok {
		return ""
	}
	return s
}

// compareFS compares the file changes of a replay with the recorded ones:
// path, operation, kind, mode and content hash.
func compareFS(want, got []sandbox.Change, wantName, gotName string) Component {
	c := Component{Name: "fs_diff", Compared: true, Match: true}
	key := func(x sandbox.Change) string {
		return fmt.Sprintf("%s %s %s %o %s %s", x.Op, x.Kind, x.Path, x.Mode, x.Hash, x.LinkTarget)
	}
	w, g := map[string]sandbox.Change{}, map[string]sandbox.Change{}
	var paths []string
	for _, x := range want {
		w[x.Path] = x
		paths = append(paths, x.Path)
	}
	for _, x := range got {
		g[x.Path] = x
		if _, ok := w[x.Path]; !ok {
			paths = append(paths, x.Path)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		a, inW := w[p]
		b, inG := g[p]
		switch {
		case !inG:
			c.Match, c.First = false, fmt.Sprintf("%s: %s by the %s, untouched by the %s", p, a.Op, wantName, gotName)
		case !inW:
			c.Match, c.First = false, fmt.Sprintf("%s: %s by the %s, untouched by the %s", p, b.Op, gotName, wantName)
		case key(a) != key(b):
			c.Match, c.First = false, fmt.Sprintf("%s: %s", p, describeFSDiff(a, b, wantName, gotName))
		}
		if !c.Match {
			break
		}
	}
	return c
}

func describeFSDiff(a, b sandbox.Change, an, bn string) string {
	switch {
	case a.Op != b.Op:
		return fmt.Sprintf("%s by the %s, %s by the %s", b.Op, bn, a.Op, an)
	case a.Kind != b.Kind:
		return fmt.Sprintf("a %s after the %s, a %s after the %s", b.Kind, bn, a.Kind, an)
	case a.Mode != b.Mode:
		return fmt.Sprintf("mode %o after the %s, %o after the %s", b.Mode, bn, a.Mode, an)
	default:
		return fmt.Sprintf("different content after the %s than after the %s", bn, an)
	}
}

func compareClock(recorded, replayed *vclock.File) Component {
	c := Component{Name: "clock", Compared: true, Match: true}
	d := append(append([]vclock.DriftEntry{}, replayed.Drift...), vclock.Compare(recorded, replayed)...)
	if len(d) > 0 {
		c.Match = false
		c.First = fmt.Sprintf("stream %s (%s): %s", d[0].Stream, d[0].What, d[0].Detail)
	}
	return c
}

// Render writes the verdict for a terminal.
func (v *Verdict) Render(w io.Writer) {
	status := "EXACT"
	if !v.Exact {
		status = "DRIFT"
	}
	fmt.Fprintf(w, "replay of %s: %s, fidelity %.2f (workspace from its %s state; replay %d ms, record %d ms)\n",
		v.Bundle, status, v.Fidelity, v.State, v.WallMS, v.RecordMS)
	for _, c := range v.Components {
		mark := "  ok     "
		switch {
		case !c.Compared:
			mark = "  -      "
		case !c.Match:
			mark = "  DRIFT  "
		}
		line := mark + c.Name
		if !c.Compared {
			line += " (not in this bundle)"
		}
		fmt.Fprintln(w, line)
		if c.First != "" {
			for _, l := range strings.Split(c.First, "\n") {
				fmt.Fprintln(w, "           "+l)
			}
		}
	}
}
