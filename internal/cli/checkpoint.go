package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

// cpFlagNames are the names of the store and retention flags: record
// and run prefix them, the checkpoint subcommands do not.
type cpFlagNames struct{ store, keep, maxAge, aged string }

var (
	cpRunNames     = cpFlagNames{"checkpoint-store", "keep-checkpoints", "checkpoint-max-age", "checkpoint-aged"}
	cpCommandNames = cpFlagNames{"store", "keep", "max-age", "aged"}
)

func cpStoreFlag(name string) ucli.Flag {
	return &ucli.StringFlag{Name: name, EnvVars: []string{checkpoint.EnvStore},
		Usage: "checkpoint store directory (default: $XDG_STATE_HOME/dal/checkpoints, else ~/.local/state/dal/checkpoints)"}
}

func cpRetentionFlags(n cpFlagNames) []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: n.keep, Value: checkpoint.DefaultKeep, EnvVars: []string{"DAL_KEEP_CHECKPOINTS"},
			Usage: "retention: keep the N most recent checkpoints per workspace, and beyond them all of failed runs and tagged ones (0: no count limit)"},
		&ucli.StringFlag{Name: n.maxAge, Value: checkpoint.FormatAge(checkpoint.DefaultMaxAge), EnvVars: []string{"DAL_CHECKPOINT_MAX_AGE"},
			Usage: "retention: untagged checkpoints stored longer ago than this (30d, 2w, 36h; 0: no limit) are deleted or compressed"},
		&ucli.StringFlag{Name: n.aged, Value: string(checkpoint.AgedDelete), EnvVars: []string{"DAL_CHECKPOINT_AGED"},
			Usage: "retention: what happens to checkpoints older than the max age: delete, or compress (recompress at zstd's best level and keep)"},
	}
}

// CheckpointFlags are the checkpoint flags of record and run: the store
// (--checkpoint-store) and the retention applied after the run's
// checkpoints are stored (--keep-checkpoints, --checkpoint-max-age,
// --checkpoint-aged).
func CheckpointFlags() []ucli.Flag {
	return categorize(catCheckpoints, append([]ucli.Flag{cpStoreFlag(cpRunNames.store), autoCheckpointFlag()}, cpRetentionFlags(cpRunNames)...)...)
}

// RetentionFromFlags reads the retention flags of CheckpointFlags; a bad value is
// a usage error (exit 2), so call it before the agent starts.
func RetentionFromFlags(c *ucli.Context) (checkpoint.Policy, error) {
	if _, err := autoFromFlags(c); err != nil {
		return checkpoint.Policy{}, err
	}
	return cpRetentionFrom(c, cpRunNames)
}

// StoreFromFlags opens the store CheckpointFlags name, with their policy.
func StoreFromFlags(c *ucli.Context) (*checkpoint.Store, error) {
	return cpStoreFrom(c, cpRunNames)
}

func cpRetentionFrom(c *ucli.Context, n cpFlagNames) (checkpoint.Policy, error) {
	var p checkpoint.Policy
	p.Keep = c.Int(n.keep)
	if p.Keep < 0 {
		return p, usageError{Err: fmt.Errorf("--%s %d: give a count >= 0 (0 keeps every checkpoint)", n.keep, p.Keep)}
	}
	age, err := checkpoint.ParseAge(c.String(n.maxAge))
	if err != nil {
		return p, usageError{Err: fmt.Errorf("--%s: %w", n.maxAge, err)}
	}
	p.MaxAge = age
	if p.Aged, err = checkpoint.ParseAgedAction(c.String(n.aged)); err != nil {
		return p, usageError{Err: fmt.Errorf("--%s: %w", n.aged, err)}
	}
	return p, nil
}

func cpStoreFrom(c *ucli.Context, n cpFlagNames) (*checkpoint.Store, error) {
	s, err := checkpoint.Open(c.String(n.store))
	if err != nil {
		return nil, usageError{Err: err}
	}
	if s.Policy, err = cpRetentionFrom(c, n); err != nil {
		return nil, err
	}
	return s, nil
}

// StoreCheckpoints is what record and run call when the agent has exited:
// it reads the checkpoint marks in marksDir, stores them for run in the
// store the CheckpointFlags name and applies their retention, reporting on w
// (one "dal: ..." line each: what was stored, skipped or pruned). A run
// without checkpoint marks does nothing and returns (nil, nil).
func StoreCheckpoints(c *ucli.Context, run checkpoint.Run, marksDir string, w io.Writer) (*checkpoint.IngestResult, error) {
	return StoreRunCheckpoints(c, run, marksDir, "", w)
}

// StoreRunCheckpoints is StoreCheckpoints with the automatic checkpoints
// of --auto-checkpoint (autocheckpoint.go): autoDir holds the marks dal
// wrote itself during the run (before_external_call; "" for none).
func StoreRunCheckpoints(c *ucli.Context, run checkpoint.Run, marksDir, autoDir string, w io.Writer) (*checkpoint.IngestResult, error) {
	auto, err := autoFromFlags(c)
	if err != nil {
		return nil, err
	}
	ms, inc, err := checkpoint.RunMarks(marksDir, autoDir, auto)
	for _, i := range inc {
		fmt.Fprintf(w, "dal: %s\n", i)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	s, err := StoreFromFlags(c)
	if err != nil {
		return nil, err
	}
	res, err := s.Ingest(run, ms)
	if err != nil {
		return nil, err
	}
	cpReportIngest(w, s, res)
	return res, nil
}

func cpReportIngest(w io.Writer, s *checkpoint.Store, res *checkpoint.IngestResult) {
	for _, err := range res.Skipped {
		fmt.Fprintf(w, "dal: %s\n", err)
	}
	if n := len(res.Stored); n > 0 {
		last := res.Stored[n-1]
		fmt.Fprintf(w, "dal: stored %s of run %s in %s (restore: dal-exec checkpoint restore %s)\n",
			cpPlural(n, "checkpoint"), res.Run.ID, s.Dir, last.ID)
	}
	if res.Pruned != nil {
		for _, d := range res.Pruned.Deleted {
			fmt.Fprintf(w, "dal: retention deleted checkpoint %s (%s): %s\n", d.ID, cpName(d.Name), d.Reason)
		}
		for _, d := range res.Pruned.Compacted {
			fmt.Fprintf(w, "dal: retention compressed checkpoint %s (%s): %s\n", d.ID, cpName(d.Name), d.Reason)
		}
		for _, err := range res.Pruned.Skipped {
			fmt.Fprintf(w, "dal: retention skipped a run: %s\n", err)
		}
	}
	if res.PruneErr != nil {
		fmt.Fprintf(w, "dal: retention: %s\n", res.PruneErr)
	}
}

// CheckpointCommand is `dal-exec checkpoint`.
func CheckpointCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "checkpoint",
		Usage: "save, list, validate and restore checkpoints: an agent's artifacts and state at a boundary",
		Description: `An agent marks checkpoints at its phase and iteration boundaries (dal-exec checkpoint save
from a shell, dal.checkpoint(...) from Python or Node). When the agent's run ends, dal-exec
stores them in the checkpoint store (--store, $DAL_CHECKPOINTS, default
$XDG_STATE_HOME/dal/checkpoints or ~/.local/state/dal/checkpoints): one zstd-compressed archive
per checkpoint, a manifest per run, SHA-256 hashes of every archive, artifact and state.

Retention runs after every store and with prune: per workspace the 5 most recent checkpoints
are kept, beyond them all of a failed run and tagged ones; untagged checkpoints older than 30
days are deleted (or, with --aged compress, recompressed and kept).

Recovery: list, validate, restore (the artifacts into the run's workspace or --to DIR; the
state is printed or written to --state-out), then resume the agent from that state.

Checkpoint ids are RUN/SEQ as list shows; a unique prefix of the run, RUN (its latest) and
latest (the newest in the store) work too.

Examples:
   dal-exec checkpoint save phase-build out/ --state '{"phase": "build"}'
   dal-exec checkpoint list
   dal-exec checkpoint validate
   dal-exec checkpoint restore latest --state-out state.json
   dal-exec checkpoint tag 20260301-120000-1a2b3c4d/2 release-1
   dal-exec checkpoint prune --keep 3 --dry-run`,
		Subcommands: []*ucli.Command{
			checkpointSaveCommand(),
			checkpointListCommand(),
			checkpointShowCommand(),
			checkpointValidateCommand(),
			checkpointRestoreCommand(),
			checkpointTagCommand(),
			checkpointUntagCommand(),
			checkpointPruneCommand(),
			checkpointRepairCommand(),
		},
	}
}

// cpDamagedExit reports errors about damaged manifests and exits 1.
func cpDamagedExit(c *ucli.Context, err error) error {
	if err == nil {
		return nil
	}
	for _, e := range cpUnjoin(err) {
		fmt.Fprintf(c.App.ErrWriter, "dal-exec: %s\n", e)
	}
	return exitError{1}
}

func cpUnjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func cpOpenStore(c *ucli.Context) (*checkpoint.Store, error) {
	s, err := checkpoint.Open(c.String(cpCommandNames.store))
	if err != nil {
		return nil, usageError{Err: err}
	}
	return s, nil
}

func cpOneID(c *ucli.Context, cmd string) (string, error) {
	args, err := cpArgs(c)
	if err != nil {
		return "", err
	}
	if len(args) != 1 {
		what := "a checkpoint id"
		if cmd == "repair" {
			what = "a run id"
		}
		return "", usageError{Err: fmt.Errorf("%s takes %s, e.g. dal-exec checkpoint %s latest", cmd, what, cmd)}
	}
	return args[0], nil
}

// cpArgs returns the positional arguments, applying flags given
// after them (urfave/cli stops at the first argument): `restore ID --to
// DIR` works as users write it. "--" ends the flags.
func cpArgs(c *ucli.Context) ([]string, error) {
	in := c.Args().Slice()
	var out []string
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			return append(out, in[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			out = append(out, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := cpFlag(c.Command, name)
		if f == nil {
			return nil, usageError{Err: fmt.Errorf("flag %s is not defined for %s (put a path that starts with - as ./%s)", a, c.Command.HelpName, a)}
		}
		if vf, ok := f.(interface{ TakesValue() bool }); ok && vf.TakesValue() {
			if !hasVal {
				if i+1 >= len(in) {
					return nil, usageError{Err: fmt.Errorf("flag %s needs a value", a)}
				}
				i++
				val = in[i]
			}
		} else if !hasVal {
			val = "true"
		}
		if err := c.Set(f.Names()[0], val); err != nil {
			return nil, usageError{Err: fmt.Errorf("flag %s: %v", a, err)}
		}
	}
	return out, nil
}

func cpFlag(cmd *ucli.Command, name string) ucli.Flag {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func cpName(n string) string {
	if n == "" {
		return "unnamed"
	}
	return n
}

func cpDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cpPlural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// cpBytes prints n in B, KiB, MiB or GiB.
func cpBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
