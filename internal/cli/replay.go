package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dal-runtime/dal/internal/replay"
	"github.com/dal-runtime/dal/internal/termsafe"
	ucli "github.com/urfave/cli/v2"
)

// ReplayCommand is `dal-exec replay`.
func ReplayCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "replay",
		Usage:     "re-run a bundle offline and verify it behaves the same (exit 0 exact, 1 drift, 2 error)",
		ArgsUsage: "BUNDLE",
		Description: `Verifies the bundle, rebuilds the pre-run workspace in a sandbox (from the workspace when it
is at the recorded pre- or post-run state, or from a self-contained bundle), re-runs the
recorded command with the recorded mode, seed and epoch, serves the recorded clock, and
compares exit code, stdout, stderr, file changes, clock streams, the network request sequence
and the LLM calls. The user's workspace is never written. The network is offline: the agent has
its own network namespace and only the bundle's network.har answers; identical requests get
their recorded responses in order, streams come back with their recorded chunk boundaries, and
a request the recording cannot answer gets an error response (HTTP 502) and is reported with
the nearest recorded request and the fields that differ. The outcome is stored in the bundle's
replays/, signed with your key, without touching the bundle's signature.

A bundle is trusted when it is signed by your own key, a --key, or a key in the trusted-keys
file; any other signer is refused unless --trust-signer names it. Replay acts on the current
directory, which must be the workspace the bundle was recorded in, or on --workspace: the path
the bundle records is compared, never used as a destination. The
replayed agent gets the recorded values of kept plain settings and a placeholder for secrets;
nothing of your environment unless --keep-env names it.

Matching (docs/validation.md): --match exact (the default) compares byte for byte; semantic
accepts a similarity at or above --threshold (0.95; dal's built-in, deterministic similarity,
or --similarity-cmd); structural accepts the same JSON/YAML structure or line structure with
different values. Give one for stdout, stderr, fs_diff, prompts and iterations, or per component. The
verdict carries the match_status (exact_match, semantic_match, partial_match, no_match) and
exits 0 on an exact or semantic match.

--live re-executes the command with the recorded mode, seed, epoch and workspace state but
with the network live through the recording proxy (--allow-loopback, the recorded allowlist
for your own bundles), records the run as the bundle --out (never applied), and compares the
two runs; the clock is not compared.

Examples:
   dal-exec replay run1
   dal-exec replay --json run1 | jq .exact
   dal-exec replay --json-out verdict.json run1.tar.zst
   dal-exec replay --show-output --workspace ./project run1
   dal-exec replay --replay-speed 1 run1      # streams keep their recorded timing
   dal-exec replay --match stdout=semantic run1
   dal-exec replay --live --out run1-live --match stdout=semantic,fs_diff=structural run1`,
		Flags: flagList(
			categorize(catRun,
				&ucli.Float64Flag{Name: "replay-speed", Value: 0, EnvVars: []string{"DAL_REPLAY_SPEED"},
					Usage: "pace of replayed streams: 0 as fast as possible, 1 the recorded timing, 2 twice as fast"},
				&ucli.StringSliceFlag{Name: "keep-env", Usage: "give the replayed agent this variable from your environment instead of the recorded value or a secret's placeholder (repeatable)"},
				&ucli.StringFlag{Name: "socket", EnvVars: []string{"DAL_SOCKET"}, Usage: "a running dald to report the replay's fidelity to (default: the one at the default socket, if any)"}),
			categorize(catSandbox, append([]ucli.Flag{
				&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the workspace to rebuild the pre-run state from (default: the current directory, if the bundle was recorded there)"}},
				append(bindFlags(), limitFlags()...)...)...),
			categorize(catOutput,
				&ucli.GenericFlag{Name: "json", Value: &jsonSwitch{}, Usage: "print the verdict as JSON on stdout (the text verdict goes to stderr)"},
				&ucli.StringFlag{Name: "json-out", Usage: "also write the verdict as JSON to this file"},
				&ucli.BoolFlag{Name: "show-output", Usage: "print the replayed agent's stdout as it runs"},
				metricsTextfileFlag()),
			matchFlags(), liveFlags(), gateFlags(true),
			trustFlags()),
		Action: func(c *ucli.Context) error {
			js, err := replayJSON(c)
			if err != nil {
				return err
			}
			trust, err := trustFromFlags(c)
			if err != nil {
				return err
			}
			o := replay.Options{Bundle: js.bundle, Workspace: c.String("workspace"), Trust: trust, KeyPath: os.Getenv("DAL_KEY"), Log: c.App.ErrWriter,
				Speed: c.Float64("replay-speed"), KeepEnv: c.StringSlice("keep-env")}
			if o.ReadOnly, o.Writable, err = bindsFromFlags(c); err != nil {
				return err
			}
			if o.Limits, err = limitsFromFlags(c); err != nil {
				return err
			}
			if o.Speed < 0 {
				return usageError{Err: fmt.Errorf("--replay-speed %v is negative: use 0 (fast), 1 (recorded timing) or more", o.Speed)}
			}
			if c.Bool("show-output") {
				o.Stdout = termsafe.NewWriter(c.App.Writer)
			}
			if o.Match, err = matchFromFlags(c); err != nil {
				return err
			}
			if o.Policy, err = loadGate(c, false); err != nil {
				return err
			}
			figs, err := newFigures(c)
			if err != nil {
				return err
			}
			v, err := replayLiveOrNot(c, o)
			if err != nil {
				return err
			}
			figs.replay(v.Fidelity)
			figs.network("replayed", v.Served)
			figs.network("miss", v.Misses)
			if err := figs.publish(); err != nil {
				return err
			}
			out := c.App.Writer
			if js.stdout {
				out = c.App.ErrWriter
			}
			v.Render(out)
			b, _ := json.MarshalIndent(v, "", "  ")
			b = append(b, '\n')
			if js.stdout {
				c.App.Writer.Write(b)
			}
			if js.file != "" {
				if err := os.WriteFile(js.file, b, 0o644); err != nil {
					return fmt.Errorf("write --json-out: %w", err)
				}
			}
			if !v.Matched() {
				return exitError{1}
			}
			return nil
		},
	}
}

// jsonSwitch is replay's --json: a switch (--json, --json=false) that
// prints the verdict as JSON on stdout. It still takes the value of the
// old --json=FILE, which replayJSON honours with a deprecation notice.
type jsonSwitch struct {
	on   bool
	file string // the old form's FILE ("-": stdout)
}

func (j *jsonSwitch) IsBoolFlag() bool { return true }
func (j *jsonSwitch) String() string   { return "" }
func (j *jsonSwitch) Set(s string) error {
	switch s {
	case "true":
		j.on, j.file = true, ""
	case "false":
		j.on, j.file = false, ""
	default:
		j.on, j.file = true, s
	}
	return nil
}

// replayOutput is where replay's verdict goes, and which bundle it replays.
type replayOutput struct {
	bundle string
	stdout bool   // the JSON on stdout, the text verdict on stderr
	file   string // the JSON also written here
}

// replayJSON reads the bundle argument, --json and --json-out. The old
// --json FILE (FILE "-" for stdout), which the switch leaves as an extra
// argument before the bundle, keeps working with a one-line notice.
func replayJSON(c *ucli.Context) (replayOutput, error) {
	js := c.Generic("json").(*jsonSwitch)
	args := c.Args().Slice()
	if js.on && js.file == "" && len(args) == 2 {
		js.file, args = args[0], args[1:]
	}
	if len(args) != 1 {
		if js.on {
			return replayOutput{}, usageError{Err: fmt.Errorf("replay takes one bundle (--json is a switch now: write --json-out FILE to save the JSON), e.g. dal-exec replay --json run1")}
		}
		return replayOutput{}, usageError{Err: fmt.Errorf("replay takes one bundle, e.g. dal-exec replay run1")}
	}
	out := replayOutput{bundle: args[0], stdout: js.on, file: c.String("json-out")}
	if js.file != "" {
		if out.file != "" {
			return out, usageError{Err: fmt.Errorf("--json %s and --json-out %s both name a file: keep --json-out", js.file, out.file)}
		}
		fmt.Fprintf(c.App.ErrWriter, "dal: --json FILE is deprecated: write --json-out FILE for a file, --json alone for stdout\n")
		if js.file == "-" {
			out.stdout = true
		} else {
			out.stdout, out.file = false, js.file
		}
	}
	return out, nil
}
