package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/match"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
)

// LiveOptions configure a live re-execution (dal-exec replay --live).
type LiveOptions struct {
	// Options: the bundle, its trust, the workspace, the caller's key,
	// logs, --keep-env and the matching strategies; Speed is unused.
	Options
	// Out is the new bundle, recorded as dal-exec record would.
	Out string
	// Network adds to the recorded capture settings: AllowLoopback and
	// AllowAddress (the recorded allowlists are kept only for your own
	// bundles) and
	// Before hooks (policy, strict-mode LLM checks).
	Network record.NetworkOptions
}

// LiveFile is the new bundle's record of what it re-executed and how it
// compared: the original bundle's path and snapshot id, and the verdict.
const LiveFile = "replay-of.json"

// Live re-executes a bundle's command with the recorded mode, seed,
// epoch, CPUs and workspace state, but with the network live through the
// recording proxy, records the run as a new bundle (o.Out, never applied
// to the workspace), and compares the two component by component with
// o.Match. The verdict goes to the new bundle (replay-of.json and its
// manifest's replay_status) and, signed, to the original's replays/.
func Live(ctx context.Context, o LiveOptions) (*Verdict, error) {
	r, err := openReplay(o.Options)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.prepareWorkspace(); err != nil {
		return nil, err
	}
	spec := r.liveSpec()
	start := time.Now()
	var v *Verdict
	ro := record.Options{Spec: spec, Out: o.Out, Workspace: r.ws, NoApply: true, KeyPath: o.KeyPath, SecretEnv: r.env.Secrets,
		Iterations: r.policy, Network: r.liveNetwork(o.Network, spec.KeepEnv)}
	ro.Rerun = &record.Rerun{Lower: r.cfg.Lower, Cwd: r.env.Cwd, BeforeCommit: func(dir string, m *bundle.Manifest) error {
		var err error
		if v, err = r.compareLive(ctx, dir); err != nil {
			return err
		}
		v.WallMS, v.NewBundle = time.Since(start).Milliseconds(), o.Out
		now := time.Now().UTC()
		m.ReplayStatus = &bundle.ReplayStatus{Replayed: true, ReplayCount: 1, LastReplay: &now, MatchStatus: v.MatchStatus}
		return writeLiveFile(dir, r, v)
	}}
	if _, err := record.Record(ctx, ro); err != nil {
		return nil, err
	}
	r.v = v
	r.storeOutcome()
	return v, nil
}

// liveSpec is the recorded run: command, directory, mode, seed, epoch,
// quantum, CPUs, timeout and environment (kept plain settings by value,
// secrets as placeholders unless --keep-env names them).
func (r *replaying) liveSpec() runner.Spec {
	env := &r.env
	spec := runner.Spec{Args: env.Command, Mode: env.Mode, Seed: env.Seed, Epoch: env.Epoch,
		Quantum: time.Duration(env.QuantumNS), CPUs: env.CPUs, Log: r.o.Log, Inherit: env.Inherited,
		Stdout: io.Discard, Stderr: io.Discard}
	if r.o.Stdout != nil {
		spec.Stdout = r.o.Stdout
	}
	if env.Timeout != "" {
		spec.Timeout, _ = time.ParseDuration(env.Timeout)
	}
	spec.Env = r.keptEnv()
	spec.KeepEnv = r.spec.KeepEnv // keptEnv named them there
	return spec
}

// liveNetwork is the capture of the new recording: the recorded redaction
// settings, the caller's hooks and loopback allowlist, and the recorded
// allowlist when the bundle is the caller's own (a bundle from elsewhere
// never opens this host's services by itself).
func (r *replaying) liveNetwork(o record.NetworkOptions, keep []string) record.NetworkOptions {
	n := record.NetworkOptions{AllowLoopback: o.AllowLoopback, AllowAddress: o.AllowAddress, Before: o.Before, KeepEnv: keep,
		RedactHeaders: o.RedactHeaders, RedactFields: o.RedactFields}
	if rec := r.env.Network; rec != nil {
		n.RedactHeaders = append(n.RedactHeaders, rec.RedactHeaders...)
		n.RedactFields = append(n.RedactFields, rec.RedactFields...)
		if why := r.foreign(); why == "" {
			n.AllowLoopback = append(n.AllowLoopback, rec.Allowed...)
			n.AllowAddress = append(n.AllowAddress, rec.AllowedAddresses...)
		} else {
			if len(rec.Allowed) > 0 {
				fmt.Fprintf(r.o.Log, "dal: %s was %s: the services it was allowed to reach on its host (%v) are not opened here; pass --allow-loopback to allow them\n", r.o.Bundle, why, rec.Allowed)
			}
			if len(rec.AllowedAddresses) > 0 {
				fmt.Fprintf(r.o.Log, "dal: %s was %s: the addresses it was allowed to reach (%v) are not opened here; pass --allow-address to allow them\n", r.o.Bundle, why, rec.AllowedAddresses)
			}
		}
	}
	return n
}

// staged is the new bundle before its commit: a plain directory dal is
// writing.
type staged struct{ dir string }

func (s staged) read(rel string) ([]byte, error) {
	return record.ReadNoFollow(filepath.Join(s.dir, filepath.FromSlash(rel)))
}

func (s staged) has(rel string) bool {
	fi, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(rel)))
	return err == nil && fi.Mode().IsRegular()
}

// compareLive compares the staged new bundle in dir with the original.
// The clock is not compared: with the network live its readings follow
// the new answers' timing.
func (r *replaying) compareLive(ctx context.Context, dir string) (*Verdict, error) {
	got, err := readLive(dir)
	if err != nil {
		return nil, err
	}
	v := &Verdict{Bundle: r.o.Bundle, RecordMS: r.env.DurationMS, State: r.v.State, Live: true}
	recOut, _ := r.b.ReadFile("logs/stdout")
	recErr, _ := r.b.ReadFile("logs/stderr")
	code := got.env.ExitCode
	v.Components = append(v.Components,
		Component{Name: "exit_code", Compared: true, Match: code == r.env.ExitCode,
			First: ifNot(code == r.env.ExitCode, fmt.Sprintf("exit code %d, the recording has %d", code, r.env.ExitCode))},
		Component{Name: "stdout", Compared: true, Match: string(recOut) == string(got.stdout), First: FirstLineDiff(recOut, got.stdout)},
		Component{Name: "stderr", Compared: true, Match: string(recErr) == string(got.stderr), First: FirstLineDiff(recErr, got.stderr)},
		compareFS(r.changes, got.changes, "recording", "replay"),
	)
	recIts, _, err := marks.Read(filepath.Dir(r.b.File("iterations")), marks.Iteration)
	if err != nil {
		return nil, err
	}
	if len(recIts) > 0 || len(got.its) > 0 {
		v.Components = append(v.Components, compareIterations(recIts, got.its, "recording", "replay"))
	}
	v.Components = append(v.Components, liveRequests(r.recHAR, got.har, r.env.Network != nil))
	pc, want, gotPs, err := r.livePrompts(got.dir)
	if err != nil {
		return nil, err
	}
	v.Components = append(v.Components, pc)
	spec := r.o.Match
	v.settle(ctx, spec, func(name string) (match.Result, bool) {
		switch name {
		case "stdout":
			return spec.Compare(ctx, name, "", recOut, got.stdout), true
		case "stderr":
			return spec.Compare(ctx, name, "", recErr, got.stderr), true
		case "fs_diff":
			return matchFS(ctx, spec, r.changes, got.changes,
				func(p string) ([]byte, error) { return r.b.ReadFile("fs-diff/files/" + sandbox.MirrorPath(p)) },
				func(p string) ([]byte, error) { return got.dir.read("fs-diff/files/" + sandbox.MirrorPath(p)) }), true
		case "prompts":
			return matchPrompts(ctx, spec, want, gotPs), true
		case "iterations":
			return matchIterations(spec, recIts, got.its), true
		}
		return match.Result{}, false
	})
	return v, nil
}

// liveRun is what the new bundle of a live re-execution holds, read
// before its commit.
type liveRun struct {
	dir            staged
	env            record.RunEnv
	changes        []sandbox.Change
	stdout, stderr []byte
	its            []*marks.Mark
	har            *har.Log
}

// readLive reads the staged new bundle in dir.
func readLive(dir string) (*liveRun, error) {
	l := &liveRun{dir: staged{dir}, har: &har.Log{}}
	b, err := l.dir.read("env.json")
	if err == nil {
		err = json.Unmarshal(b, &l.env)
	}
	if err != nil {
		return nil, fmt.Errorf("the new bundle's env.json: %w", err)
	}
	if l.changes, err = sandbox.ReadChanges(filepath.Join(dir, "fs-diff", "changes.json")); err != nil {
		return nil, err
	}
	l.stdout, _ = l.dir.read("logs/stdout")
	l.stderr, _ = l.dir.read("logs/stderr")
	if l.its, _, err = marks.Read(dir, marks.Iteration); err != nil {
		return nil, err
	}
	if l.dir.has("network.har") {
		if l.har, err = har.ReadFile(filepath.Join(dir, "network.har")); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// livePrompts compares the LLM calls of the new bundle s with the
// recorded ones, when the recording made any, and returns both lists for
// a relaxed comparison.
func (r *replaying) livePrompts(s staged) (c Component, want, got []*prompts.Prompt, err error) {
	c = Component{Name: "prompts", Compared: r.b.Has("prompts/0001.json"), Match: true}
	if !c.Compared {
		return c, nil, nil, nil
	}
	if want, err = prompts.ReadDir(r.b.File("prompts")); err != nil {
		return c, nil, nil, err
	}
	if s.has("prompts/0001.json") {
		if got, err = prompts.ReadDir(filepath.Join(s.dir, "prompts")); err != nil {
			return c, nil, nil, err
		}
	}
	if d := prompts.Diff(want, got); d != "" {
		c.Match, c.First = false, d
	}
	return c, want, got, nil
}

// liveRequests compares the request sequence of a live re-execution with
// the recorded one by method and URL: bodies may quote earlier answers,
// which a live network changes.
func liveRequests(rec, got *har.Log, captured bool) Component {
	c := Component{Name: "network", Compared: captured, Match: true}
	if !captured {
		return c
	}
	line := func(e har.Entry) string { return e.Request.Method + " " + e.Request.URL }
	n := min(len(rec.Entries), len(got.Entries))
	for i := 0; i < n; i++ {
		if a, b := line(rec.Entries[i]), line(got.Entries[i]); a != b {
			c.Match, c.First = false, fmt.Sprintf("request %d: the recording made %s, the replay %s", i+1, a, b)
			return c
		}
	}
	if len(rec.Entries) != len(got.Entries) {
		c.Match, c.First = false, fmt.Sprintf("%d requests in the recording, %d in the replay", len(rec.Entries), len(got.Entries))
	}
	return c
}

// writeLiveFile writes replay-of.json into the staged new bundle.
func writeLiveFile(dir string, r *replaying, v *Verdict) error {
	doc := struct {
		Bundle     string   `json:"bundle"`
		SnapshotID string   `json:"snapshot_id"`
		Verdict    *Verdict `json:"verdict"`
	}{r.o.Bundle, r.b.Manifest.SnapshotID, v}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, LiveFile), append(b, '\n'), 0o644)
}
