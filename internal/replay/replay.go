package replay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/digest"
	"github.com/dal-runtime/dal/internal/iterate"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/marks/rundir"
	"github.com/dal-runtime/dal/internal/match"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/termsafe"
	"github.com/dal-runtime/dal/vclock"
)

// Options configure a replay.
type Options struct {
	Bundle string
	// Workspace is the directory to rebuild the pre-run state from;
	// default: the current directory, which must be the recorded
	// workspace (WorkspaceFor).
	Workspace string
	// Trust are the keys the user trusts; a bundle signed by another key
	// is refused. Nil: only the signature's self-consistency is checked
	// (tests and callers that verified the bundle themselves).
	Trust *bundle.Trust
	// KeyPath is the replayer's signing key, which signs the outcome
	// stored in replays/ ("" = bundle.DefaultKeyPath; created on first
	// use, as record does).
	KeyPath string
	Log     io.Writer // dal's messages (required)
	Stdout  io.Writer // where the replayed agent's output also goes (nil: nowhere)
	// Speed of network replay: 0 as fast as possible, 1 the recorded
	// chunk timing, 2 twice as fast.
	Speed float64
	// KeepEnv names variables the replayed agent gets from the caller's
	// environment instead of the recorded value or a secret's placeholder.
	// Nothing else of the caller's environment reaches it.
	KeepEnv []string
	// Match is the strategy per component (match.go); the zero value
	// compares every component byte for byte.
	Match match.Spec
	// Policy is the current policy (policy.go); without one a bundle's
	// own recorded policy is evaluated again.
	Policy record.Policy
	// ReadOnly and Writable are host paths shown to the replayed agent
	// beyond its private home (--ro-bind, --bind), as the record's were.
	ReadOnly, Writable []string
	// Limits are the replayed agent's resource limits (--memory, --pids,
	// --file-size).
	Limits sandbox.Limits
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
	// MatchStatus is the schema's match_status of the replay, Match the
	// strategies it was compared with and Threshold the semantic one
	// (match.go). Live is set for a live re-execution, whose new bundle is
	// NewBundle (live.go).
	MatchStatus string  `json:"match_status"`
	Match       string  `json:"match"`
	Threshold   float64 `json:"threshold"`
	Live        bool    `json:"live,omitempty"`
	NewBundle   string  `json:"new_bundle,omitempty"`
}

// replaying is one replay in progress: what each step produced for the
// next.
type replaying struct {
	o       Options
	b       *bundle.Bundle
	env     record.RunEnv
	clock   *vclock.File
	changes []sandbox.Change // the recorded ones
	ws      string
	stage   string
	cfg     sandbox.Config
	spec    runner.Spec
	recHAR  *har.Log
	nw      *record.Network
	marks   string
	policy  iterate.Policy
	v       *Verdict

	stdout, stderr bytes.Buffer
	res            *runner.Result
	xs             []*har.Exchange
	recIts, gotIts []*marks.Mark
	got            []sandbox.Change
	cleanup        []func()
	gate           *policy.Gate // policy.go; nil without a policy
}

// Replay re-runs a bundle's command offline in a sandbox built from the
// pre-run workspace state, serving the recorded clock and network, and
// compares the components of docs/design.md §9. The user's workspace is
// never written.
func Replay(ctx context.Context, o Options) (*Verdict, error) {
	r, err := openReplay(o)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if r.o.Policy.Policy == nil && r.b.Has(policy.AuditFile) && !policy.HaveEngine() {
		// The bundle's own policy is evaluated again: dal-exec's command
		// line runs the replay in dal-exec-full, before anything is done.
		return nil, policy.ErrNoEngine
	}
	steps := []func() error{
		r.prepareWorkspace,
		r.startPolicy,
		r.buildSandbox,
		r.gatePolicy,
		func() error { return r.run(ctx) },
		r.capture,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	r.compare()
	r.settle(ctx)
	r.storeOutcome()
	return r.v, nil
}

// openReplay opens and verifies the bundle and reads what the replay
// serves and compares: env.json, clock.json and the recorded changes.
func openReplay(o Options) (*replaying, error) {
	b, err := bundle.Open(o.Bundle, bundle.OpenOptions{Trust: o.Trust})
	if err != nil {
		return nil, err
	}
	if why := b.Manifest.Dal.Incomplete; len(why) > 0 {
		b.Close()
		return nil, runner.UsageError{Err: fmt.Errorf("%s is incomplete, so it cannot be replayed (%s); it keeps the run's network, policy and logs for audit: dal-exec show %s", o.Bundle, why[0], o.Bundle)}
	}
	r := &replaying{o: o, b: b}
	if err := r.read(); err != nil {
		b.Close()
		return nil, err
	}
	return r, nil
}

func (r *replaying) read() error {
	if err := r.b.ReadJSON("env.json", &r.env); err != nil {
		return err
	}
	if r.env.Version != record.EnvVersion {
		return fmt.Errorf("%s: env.json version %d, this dal reads %d: use the dal release that recorded it", r.o.Bundle, r.env.Version, record.EnvVersion)
	}
	var err error
	if r.clock, err = Clock(r.b); err != nil {
		return err
	}
	if r.changes, err = Changes(r.b); err != nil {
		return err
	}
	if r.policy, err = recordedPolicy(r.b.File("iterations/selection.json")); err != nil {
		return err
	}
	r.recHAR = &har.Log{}
	if r.b.Has("network.har") {
		data, err := r.b.ReadFile("network.har")
		if err != nil {
			return err
		}
		if r.recHAR, err = har.Read(bytes.NewReader(data)); err != nil {
			return err
		}
	}
	r.v = &Verdict{Bundle: r.o.Bundle, RecordMS: r.env.DurationMS}
	return nil
}

// Changes is the bundle's fs-diff/changes.json, read once and checked
// against the manifest's hash (never read again by path).
func Changes(b *bundle.Bundle) ([]sandbox.Change, error) {
	data, err := b.ReadFile("fs-diff/changes.json")
	if err != nil {
		return nil, err
	}
	return sandbox.ParseChanges(data, "fs-diff/changes.json")
}

// Clock is the bundle's clock.json, read once and hash-checked.
func Clock(b *bundle.Bundle) (*vclock.File, error) {
	data, err := b.ReadFile("clock.json")
	if err != nil {
		return nil, err
	}
	return vclock.Parse(data, "clock.json")
}

// close undoes what the steps set up, last first.
func (r *replaying) close() {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
	if r.stage != "" {
		os.RemoveAll(r.stage)
	}
	r.b.Close()
}

// prepareWorkspace decides what the replayed agent sees at the workspace
// path: the workspace itself (at its pre-run state), a layer of pre-images
// stacked over it (post-run state), or the bundle's own copy
// (self-contained).
func (r *replaying) prepareWorkspace() error {
	ws, err := WorkspaceFor(r.o.Workspace, r.o.Bundle, r.b, &r.env)
	if err != nil {
		return err
	}
	r.ws = ws
	stage, held, err := record.NewStage("dal-replay-")
	if err != nil {
		return err
	}
	r.stage = stage
	r.cleanup = append(r.cleanup, held.Release)
	r.cfg = record.SandboxConfig(ws, filepath.Join(r.stage, "sandbox"))
	if _, err := os.Stat(ws); err == nil {
		return r.restoreOver()
	}
	return r.selfContainedAt()
}

// restoreOver rebuilds the pre-run state over the existing workspace: as
// it is when it is at its pre-run state, under a layer of pre-images when
// at its post-run state, else from the bundle's own copy when it has one.
func (r *replaying) restoreOver() error {
	preLayer := filepath.Join(r.stage, "pre-layer")
	state, err := sandbox.Restore(r.ws, r.b.File("fs-pre"), r.changes, preLayer)
	switch {
	case err == nil:
		r.v.State = state
		if state == "post-run" {
			r.cfg.Lower = []string{preLayer, r.ws}
		}
	case r.env.SelfContained:
		r.v.State = "self-contained"
		r.cfg.Lower = []string{r.b.File("workspace")}
	default:
		if later := laterRun(r.o.Bundle, r.ws, &r.env); later != "" {
			return runner.UsageError{Err: fmt.Errorf("%w; replay needs the workspace at %s's pre- or post-run state, and it is at the post-run state of %s, recorded after it: run dal-exec revert %s, then replay again", err, r.o.Bundle, later, later)}
		}
		return runner.UsageError{Err: fmt.Errorf("%w; replay needs the workspace at %s's pre- or post-run state: undo what changed it since (dal-exec revert each run recorded after it, latest first), or replay --workspace DIR with a copy at that state", err, r.o.Bundle)}
	}
	return nil
}

// selfContainedAt shows the bundle's own copy of the workspace at the
// --workspace path, which does not exist.
func (r *replaying) selfContainedAt() error {
	if !r.env.SelfContained {
		return runner.UsageError{Err: fmt.Errorf("the workspace %s does not exist here and %s is not self-contained: pass --workspace naming a copy of the workspace it was recorded in, or record with --self-contained", r.ws, r.o.Bundle)}
	}
	r.v.State = "self-contained"
	r.cfg.Lower = []string{r.b.File("workspace")}
	// The overlay needs a mount point at the recorded path; it is removed
	// again after the run (close removes the stage; this is the one path
	// outside it). Only the last component is created, at the path the
	// user named: a replay never makes directories where a bundle says.
	ws := r.ws
	if err := os.Mkdir(ws, 0o700); err != nil {
		return fmt.Errorf("create the mount point %s for the self-contained workspace: %w", ws, err)
	}
	r.cleanup = append(r.cleanup, func() { os.Remove(ws) })
	return nil
}

// foreign says why the bundle is not the user's own recording on this
// machine ("" when it is): signed by a key other than the user's own, or
// recorded on another host.
func (r *replaying) foreign() string {
	return Foreign(r.b, &r.env)
}

// Foreign says why a bundle is not the user's own recording on this
// machine, "" when it is: its values (workspace path) are then not taken
// without the user naming them.
func Foreign(b *bundle.Bundle, env *record.RunEnv) string {
	if !strings.HasPrefix(b.Signer.Source, "your key") {
		return "signed by " + b.Signer.Fingerprint + ", not by your own key"
	}
	if host, _ := os.Hostname(); env.Host.Hostname != "" && env.Host.Hostname != host {
		return "recorded on " + env.Host.Hostname + ", not on this machine"
	}
	return ""
}

// buildSandbox configures the sandbox and the runner: the recorded
// command, mode, seed, epoch and clock; an offline network namespace in
// which only the bundle answers, whatever the recording's mode; the marks
// directory.
func (r *replaying) buildSandbox() error {
	env := &r.env
	r.cfg.Mounts = append(r.cfg.Mounts, record.ArgMounts(env.Command, filepath.Join(r.ws, env.Cwd), r.ws)...)
	r.spec = runner.Spec{Args: env.Command, Dir: filepath.Join(r.ws, env.Cwd), Mode: env.Mode, Seed: env.Seed,
		Epoch: env.Epoch, Quantum: time.Duration(env.QuantumNS), CPUs: env.CPUs, Replay: r.clock, Log: r.o.Log,
		Inherit: env.Inherited, ReadOnly: r.o.ReadOnly, Writable: r.o.Writable, Limits: r.o.Limits}
	if env.Timeout != "" {
		r.spec.Timeout, _ = time.ParseDuration(env.Timeout)
		r.spec.Timeout *= 2 // a replay serves the network and clock locally; never tighter than the record
	}
	r.spec.Stdout, r.spec.Stderr = &r.stdout, &r.stderr
	if r.o.Stdout != nil {
		r.spec.Stdout = multi(&r.stdout, r.o.Stdout)
	}
	if err := r.offlineNetwork(); err != nil {
		return err
	}
	maps.Copy(r.spec.Env, r.keptEnv())
	marksDir, marksMount, err := rundir.ForSandbox(r.stage)
	if err != nil {
		return err
	}
	r.marks = marksDir
	r.cfg.Mounts = append(r.cfg.Mounts, marksMount)
	maps.Copy(r.spec.Env, rundir.Vars(marks.SandboxDir, r.ws))
	r.cfg.Virtual = runner.VirtualConfig(&r.spec)
	record.WrapInSandbox(&r.spec, &r.cfg)
	return nil
}

// offlineNetwork gives the sandbox a network namespace of its own in
// which only dal's proxy answers, from the bundle, whatever the
// recording's mode; the agent gets the proxy's variables when the
// recording captured its network.
func (r *replaying) offlineNetwork() error {
	env := &r.env
	var nopts record.NetworkOptions
	mirrored := []string{}
	if env.Network != nil {
		nopts.RedactHeaders, nopts.RedactFields = env.Network.RedactHeaders, env.Network.RedactFields
		nopts.Ordered = env.Network.Ordered
		if env.Network.Mirrored != nil {
			mirrored = env.Network.Mirrored
		}
	}
	nopts.Speed = r.o.Speed
	nopts.Before = r.policyHooks()
	for _, k := range env.Secrets {
		nopts.SecretValues = append(nopts.SecretValues, record.Placeholder(k), os.Getenv(k))
	}
	nw, err := record.NewNetwork(filepath.Join(r.stage, "net"), nopts, r.recHAR, mirrored, r.o.Log)
	if err != nil {
		return fmt.Errorf("network replay: %w", err)
	}
	r.nw = nw
	nw.Configure(&r.cfg)
	r.spec.Env = map[string]string{}
	if env.Network != nil {
		maps.Copy(r.spec.Env, nw.Vars())
	}
	return nil
}

// keptEnv decides what the replayed agent gets for the variables kept at
// record time: the caller's value when the replay names it (--keep-env),
// else the recorded value of a plain setting, a placeholder for a secret.
// Bundles of earlier releases stored only hashes: those variables are
// passed only when named. It says on dal's log what it used.
func (r *replaying) keptEnv() map[string]string {
	env := &r.env
	named := map[string]bool{}
	for _, k := range r.o.KeepEnv {
		named[k] = true
		r.spec.KeepEnv = append(r.spec.KeepEnv, k)
		if h, ok := env.Kept[k]; ok && digest.Bytes([]byte(os.Getenv(k))) != h {
			fmt.Fprintf(r.o.Log, "dal: %s differs from the recorded value (only its hash is stored): set it as it was for an exact replay\n", k)
		}
	}
	out := map[string]string{}
	var recorded, placeholders, missing []string
	for k, v := range env.KeptValues {
		if !named[k] {
			out[k] = v
			recorded = append(recorded, k)
		}
	}
	for _, k := range env.Secrets {
		if !named[k] {
			out[k] = record.Placeholder(k)
			placeholders = append(placeholders, k)
		}
	}
	for k := range env.Kept {
		if !named[k] {
			missing = append(missing, k)
		}
	}
	for _, l := range []struct {
		names []string
		msg   string
	}{
		{recorded, "dal: the replay uses the recorded values of %s\n"},
		{placeholders, "dal: the replay gives the secrets %s a placeholder (pass --keep-env NAME to give the real value)\n"},
		{missing, "dal: the bundle stores only a hash of %s: pass --keep-env NAME to give the replay your value\n"},
	} {
		if len(l.names) > 0 {
			sort.Strings(l.names)
			fmt.Fprintf(r.o.Log, l.msg, strings.Join(l.names, ", "))
		}
	}
	return out
}

// secretScrubber replaces, in the replay's output, the values that stood
// in for the recorded secrets: the placeholders, and the caller's values
// of secrets the replay names.
func (r *replaying) secretScrubber() *record.Scrubber {
	var values []string
	for _, k := range r.env.Secrets {
		values = append(values, record.Placeholder(k), os.Getenv(k))
	}
	return record.NewScrubber(values)
}

// scrubbedHashes makes the file comparison hold for files whose recorded
// content was scrubbed: the recorded side is hashed as stored in the
// bundle, the replayed side after the same scrub.
func (r *replaying) scrubbedHashes() error {
	scrubbed := map[string]bool{} // by mirror path
	for _, p := range r.env.Scrubbed {
		if rel, ok := strings.CutPrefix(p, "fs-diff/files/"); ok {
			scrubbed[rel] = true
		}
	}
	if len(scrubbed) == 0 {
		return nil
	}
	s := r.secretScrubber()
	for i, c := range r.changes {
		if scrubbed[sandbox.MirrorPath(c.Path)] && c.Hash != "" {
			b, err := r.b.ReadFile("fs-diff/files/" + sandbox.MirrorPath(c.Path))
			if err != nil {
				return err
			}
			r.changes[i].Hash = digest.Bytes(b)
		}
	}
	for i, c := range r.got {
		if !scrubbed[sandbox.MirrorPath(c.Path)] || c.Hash == "" {
			continue
		}
		b, err := record.ReadNoFollow(filepath.Join(sandbox.Upper(r.cfg), filepath.FromSlash(c.Path)))
		if err != nil {
			return err
		}
		b, _ = s.Bytes(b)
		r.got[i].Hash = digest.Bytes(b)
	}
	return nil
}

// run runs the agent and stops the network replay; dal's messages during
// the run are also kept (drift reports).
func (r *replaying) run(ctx context.Context) error {
	var drift bytes.Buffer
	r.spec.Log = multi(&drift, r.o.Log)
	start := time.Now()
	res, err := runner.Run(ctx, r.spec)
	blocked, _ := sandbox.Blocked(r.cfg)
	r.xs = r.nw.Finish(blocked)
	if err != nil {
		return err
	}
	r.res = res
	r.v.WallMS = time.Since(start).Milliseconds()
	return nil
}

// capture applies the replay's own iteration selection (with the
// recording's policy, so the replayed output compares with the recorded
// one) and reads the replay's file changes.
func (r *replaying) capture() error {
	its, err := rundir.Select(r.marks, r.policy)
	if err != nil {
		return fmt.Errorf("the agent's iterations: %w", err)
	}
	if its != nil {
		r.gotIts = its.Marks
		if err := its.Apply(rundir.PlaceIn(r.cfg)); err != nil {
			return err
		}
	}
	if r.recIts, _, err = marks.Read(filepath.Dir(r.b.File("iterations")), marks.Iteration); err != nil {
		return err
	}
	if r.got, err = sandbox.Capture(r.cfg); err != nil {
		return err
	}
	return r.scrubbedHashes()
}

// compare fills the verdict: every component of the recording against the
// replay, and the fidelity.
func (r *replaying) compare() {
	v, env := r.v, &r.env
	recOut, _ := r.b.ReadFile("logs/stdout")
	recErr, _ := r.b.ReadFile("logs/stderr")
	s := r.secretScrubber()
	out, _ := s.Bytes(r.stdout.Bytes())
	errOut, _ := s.Bytes(r.stderr.Bytes())
	r.stdout.Reset()
	r.stdout.Write(out)
	r.stderr.Reset()
	r.stderr.Write(errOut)
	code := r.res.ExitCode
	v.Components = append(v.Components,
		Component{Name: "exit_code", Compared: true, Match: code == env.ExitCode,
			First: ifNot(code == env.ExitCode, fmt.Sprintf("exit code %d, the recording has %d", code, env.ExitCode))},
		Component{Name: "stdout", Compared: true, Match: bytes.Equal(recOut, r.stdout.Bytes()), First: FirstLineDiff(recOut, r.stdout.Bytes())},
		Component{Name: "stderr", Compared: true, Match: bytes.Equal(recErr, r.stderr.Bytes()), First: FirstLineDiff(recErr, r.stderr.Bytes())},
		compareFS(r.changes, r.got, "recording", "replay"),
		compareClock(r.clock, r.res.Clock),
	)
	if len(r.recIts) > 0 || len(r.gotIts) > 0 {
		v.Components = append(v.Components, compareIterations(r.recIts, r.gotIts, "recording", "replay"))
	}
	v.Misses = len(r.nw.Misses())
	for _, x := range r.xs {
		if x.Response != nil {
			v.Served++
		}
	}
	v.Served -= v.Misses
	if env.Network != nil {
		v.Components = append(v.Components, compareNetwork(r.recHAR, r.nw, r.xs), comparePrompts(r.b, r.nw, r.xs))
	} else {
		v.Components = append(v.Components, Component{Name: "network"}, Component{Name: "prompts"})
	}
	v.Components = append(v.Components, r.comparePolicy())
	v.Fidelity = Fidelity(v.Components)
	v.Exact = v.Fidelity == 1
}

// storeOutcome adds the verdict to the bundle's replays/; a bundle that
// cannot take it (read-only, packed) keeps the verdict on the terminal.
func (r *replaying) storeOutcome() {
	v := r.v
	outcome := bundle.ReplayOutcome{Fidelity: v.Fidelity, Components: map[string]bool{}, Divergences: map[string]string{}, DurationMS: v.WallMS}
	addMatch(&outcome, v)
	for _, c := range v.Components {
		if c.Compared {
			outcome.Components[c.Name] = c.Match
			if !c.Match {
				outcome.Divergences[c.Name] = c.First
			}
		}
	}
	keyPath := r.o.KeyPath
	if keyPath == "" {
		keyPath = bundle.DefaultKeyPath()
	}
	key, _, err := bundle.LoadOrCreateKey(keyPath)
	if err == nil {
		err = r.b.AddSignedReplay(outcome, key)
	}
	if err != nil {
		fmt.Fprintf(r.o.Log, "dal: could not store the replay outcome in the bundle: %v\n", err)
	}
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
	w, g, paths := byPath(want, got)
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
	if v.MatchStatus == match.SemanticMatch {
		status = "MATCH (" + v.Match + ")"
	}
	what := "replay"
	if v.Live {
		what = "live replay"
	}
	fmt.Fprintf(w, "%s of %s: %s, %s, fidelity %.2f (workspace from its %s state; replay %d ms, record %d ms)\n",
		what, termsafe.Line(v.Bundle), status, v.MatchStatus, v.Fidelity, v.State, v.WallMS, v.RecordMS)
	for _, c := range v.Components {
		mark := "  ok     "
		switch {
		case !c.Compared:
			mark = "  -      "
		case !c.Match:
			mark = "  DRIFT  "
		}
		line := mark + c.Name + c.how()
		fmt.Fprintln(w, line)
		if c.First != "" {
			for _, l := range strings.Split(c.First, "\n") {
				fmt.Fprintln(w, "           "+termsafe.Line(l))
			}
		}
	}
}

// byPath indexes two change lists by path and returns every path of
// either, sorted.
func byPath(want, got []sandbox.Change) (w, g map[string]sandbox.Change, paths []string) {
	w, g = map[string]sandbox.Change{}, map[string]sandbox.Change{}
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
	return w, g, paths
}
