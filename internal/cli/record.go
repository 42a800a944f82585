package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dal-runtime/dal/internal/checkpoint"
	"github.com/dal-runtime/dal/internal/record"
	ucli "github.com/urfave/cli/v2"
)

// RecordCommand is `dal-exec record`.
func RecordCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "record",
		Usage:     "run an agent in a sandbox and capture a signed trace bundle",
		ArgsUsage: "--out BUNDLE -- CMD [ARGS...]",
		Description: `Runs CMD as dal-exec run does, inside a sandbox: its own mount and pid namespaces, the
workspace as an overlay whose upper layer is the capture, the rest of the filesystem read-only,
a private /tmp, no new privileges, no capabilities. Writes outside the workspace fail inside the
agent and are listed in the bundle. When the run ends the bundle is written atomically to --out
(a directory, or a .tgz / .tar.zst file) and signed; then the run's changes are applied to the
workspace, as an ordinary run would leave them (--no-apply keeps them only in the bundle).
Exits with the agent's exit code.

Network (every mode but default): the agent gets a network namespace of its own whose only way
out is dal's recording proxy. HTTP_PROXY/HTTPS_PROXY point at it and an ephemeral per-run CA is
trusted through SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS. The
proxy reaches other machines, never this host's own addresses (loopback, its interfaces) unless
named: --allow-loopback 127.0.0.1:11434 lets the agent reach a local LLM server, which also
answers at the same address inside the sandbox for clients that ignore proxy variables (a kept
*_BASE_URL variable on loopback names its port too). A refused request gets 403 naming the flag
and is listed in env.json. Connections to other machines that bypass the proxy fail and are
reported. Every exchange goes to network.har (HAR 1.2; streams chunk by chunk) and LLM calls to
prompts/. Credentials (Authorization, API-key headers, cookies, token-like query and body fields)
are redacted before anything is written; --redact-header / --redact-field add names.

Examples:
   dal-exec record --out run1 -- python3 agent.py
   dal-exec record --allow-loopback 127.0.0.1:11434 --out run1 -- python3 agent.py
   dal-exec record --mode seeded --seed 7 --out run1.tar.zst -- node agent.js
   dal-exec record --no-apply --self-contained --out run1 --workspace ./project -- ./agent.sh
   dal-exec record --use final --reason "reviewer prefers it" --out run2 -- python3 refine.py

Iterations: an agent that marks refinement iterations (dal.iteration(score=..., artifacts=[...])
in Python or Node, dal-exec iteration from a shell) has every iteration's artifacts preserved in
the bundle (iterations/); the best (highest quality, the earlier on ties) is selected and its
artifacts are the run's output, not the final iteration's; iterations/selection-report.md says
why. --use final|N --reason overrides; drops over --degradation-drop, or two in a row, are flagged.`,
		Flags: flagList(runFlags(), categorize(catOutput,
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, EnvVars: []string{"DAL_OUT"},
				Usage: "where to write the bundle: a new directory (any name but an archive's; missing parents are created), or a file ending in .tgz or .tar.zst"},
			&ucli.StringFlag{Name: "key", EnvVars: []string{"DAL_KEY"},
				Usage: "ed25519 signing key (default: ~/.config/dal/signing.key, created on first use)"},
		), categorize(catSandbox,
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, EnvVars: []string{"DAL_WORKSPACE"},
				Usage: "the directory the agent may change (default: the current directory)"},
			&ucli.BoolFlag{Name: "no-apply", Usage: "keep the run's changes only in the bundle; the workspace stays as it was"},
			maxApplyBytesFlag(),
			&ucli.BoolFlag{Name: "self-contained", Usage: "also store the pre-run workspace, so the bundle replays on another machine"},
			&ucli.StringSliceFlag{Name: "redact-header", EnvVars: []string{"DAL_REDACT_HEADER"},
				Usage: "also redact this HTTP header in network.har (repeatable)"},
			&ucli.StringSliceFlag{Name: "redact-field", EnvVars: []string{"DAL_REDACT_FIELD"},
				Usage: "also redact this query or JSON/form body field in network.har and prompts/ (repeatable)"},
			&ucli.StringSliceFlag{Name: "secret-env", EnvVars: []string{"DAL_SECRET_ENV"},
				Usage: "treat this kept variable as a secret although its name does not say so: never stored, its value scrubbed from the bundle (repeatable)"},
			allowLoopbackFlag(), allowAddressFlag(), orderResponsesFlag(), enforceStrictLLMFlag(),
		), gateFlags(false), selectionFlags(), CheckpointFlags()),
		Action: func(c *ucli.Context) error {
			if err := checkBundleName(c.String("out")); err != nil {
				return err
			}
			spec, err := specFromFlags(c)
			if err != nil {
				return err
			}
			maxApply, err := maxApplyBytes(c)
			if err != nil {
				return err
			}
			spec.Stdin, spec.Stdout, spec.Stderr, spec.Log = os.Stdin, c.App.Writer, c.App.ErrWriter, c.App.ErrWriter
			figs, err := newFigures(c)
			if err != nil {
				return err
			}
			spec.Metrics = figs.m
			policy, err := selectionFromFlags(c)
			if err != nil {
				return err
			}
			if _, err := RetentionFromFlags(c); err != nil {
				return err
			}
			gp, err := gateFromFlags(c)
			if err != nil {
				return err
			}
			keep := func(marksDir string, f record.Finished) {
				seed := spec.Seed
				run := checkpoint.Run{Command: spec.Args, Workspace: f.Workspace, Mode: spec.Mode, Seed: &seed,
					Bundle: f.Bundle, Started: f.Started, Finished: f.Finished, Failed: f.Failed}
				if _, err := StoreRunCheckpoints(c, run, marksDir, f.AutoMarks, c.App.ErrWriter); err != nil {
					fmt.Fprintf(c.App.ErrWriter, "dal: the run's checkpoints were not stored: %v\n", err)
				}
			}
			sum, err := record.Record(c.Context, record.Options{Spec: spec, Iterations: policy, Checkpoints: keep, Out: c.String("out"), Workspace: c.String("workspace"),
				NoApply: c.Bool("no-apply"), MaxApplyBytes: maxApply, SelfContained: c.Bool("self-contained"), KeyPath: c.String("key"), SecretEnv: c.StringSlice("secret-env"),
				EnforceStrictLLM: c.Bool("enforce-strict-llm"), CheckpointCalls: autoCalls(c), Policy: gp,
				Network: record.NetworkOptions{RedactHeaders: c.StringSlice("redact-header"), RedactFields: c.StringSlice("redact-field"),
					AllowLoopback: c.StringSlice("allow-loopback"), AllowAddress: c.StringSlice("allow-address"), KeepEnv: spec.KeepEnv, Ordered: c.Bool("order-responses")}})
			if err != nil {
				return err
			}
			if b := sum.Boundary; b != nil && b.Coverage != nil {
				figs.coverage(*b.Coverage, b.EscapeCounts())
			}
			figs.network("recorded", sum.Exchanges)
			figs.network("blocked", sum.Blocked)
			if err := figs.publish(); err != nil {
				return err
			}
			what := "kept in the bundle only"
			if sum.Applied {
				what = "applied to the workspace"
			}
			fmt.Fprintf(c.App.ErrWriter, "dal: recorded %s (%d file changes, %s)\n", sum.Bundle, sum.Changes, what)
			if sum.ExitCode != 0 {
				return exitError{sum.ExitCode}
			}
			return nil
		},
	}
}

// checkBundleName refuses an --out that looks like an archive dal does not
// write (x.zip would become a directory named x.zip): a bundle is a
// directory, or a .tgz, .tar.gz or .tar.zst archive. Any other name, one
// with a dot included (runs/v1.2, bundle.net), is a directory.
func checkBundleName(out string) error {
	base := strings.ToLower(filepath.Base(strings.TrimRight(out, "/")))
	for _, ok := range []string{".tgz", ".tar.gz", ".tar.zst"} {
		if strings.HasSuffix(base, ok) {
			return nil
		}
	}
	for _, ext := range archiveExts {
		if strings.HasSuffix(base, ext) {
			return usageError{Err: fmt.Errorf("--out %s: dal does not write %s archives; name a directory, or a .tgz, .tar.gz or .tar.zst archive", out, ext)}
		}
	}
	return nil
}

// archiveExts are the endings of archives and compressed files that dal
// cannot write, longest first where one ends another.
var archiveExts = []string{".tar.bz2", ".tar.xz", ".tar.lz4", ".tar", ".zip", ".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".lz",
	".7z", ".rar", ".tbz", ".tbz2", ".txz", ".tzst", ".jar", ".cpio"}
