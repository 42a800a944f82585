package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dal-runtime/dal/internal/atomicfile"
	"github.com/dal-runtime/dal/internal/checkpoint"
	"github.com/dal-runtime/dal/internal/marks"
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

// PolicyFlags are the checkpoint flags of record and run: the store
// (--checkpoint-store) and the retention applied after the run's
// checkpoints are stored (--keep-checkpoints, --checkpoint-max-age,
// --checkpoint-aged).
func PolicyFlags() []ucli.Flag {
	return categorize(catCheckpoints, append([]ucli.Flag{cpStoreFlag(cpRunNames.store), autoCheckpointFlag()}, cpRetentionFlags(cpRunNames)...)...)
}

// PolicyFromFlags reads the retention flags of PolicyFlags; a bad value is
// a usage error (exit 2), so call it before the agent starts.
func PolicyFromFlags(c *ucli.Context) (checkpoint.Policy, error) {
	if _, err := autoFromFlags(c); err != nil {
		return checkpoint.Policy{}, err
	}
	return cpPolicyFrom(c, cpRunNames)
}

// StoreFromFlags opens the store PolicyFlags name, with their policy.
func StoreFromFlags(c *ucli.Context) (*checkpoint.Store, error) {
	return cpStoreFrom(c, cpRunNames)
}

func cpPolicyFrom(c *ucli.Context, n cpFlagNames) (checkpoint.Policy, error) {
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
	if s.Policy, err = cpPolicyFrom(c, n); err != nil {
		return nil, err
	}
	return s, nil
}

// StoreCheckpoints is what record and run call when the agent has exited:
// it reads the checkpoint marks in marksDir, stores them for run in the
// store the PolicyFlags name and applies their retention, reporting on w
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

func checkpointSaveCommand() *ucli.Command {
	flags := []ucli.Flag{
		&ucli.StringFlag{Name: "tag", Usage: "tag the checkpoint: retention keeps it forever"},
		&ucli.StringFlag{Name: "state", Usage: "JSON the agent wants back when it restores this checkpoint"},
		&ucli.StringFlag{Name: "state-file", Usage: "read the state JSON from this file (- for stdin)"},
		&ucli.StringFlag{Name: "note", Usage: "free text shown by list and show"},
		&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"},
			Usage: "outside a run: the workspace the artifact paths are relative to (default: the current directory)"},
		cpStoreFlag(cpCommandNames.store),
	}
	return &ucli.Command{
		Name:      "save",
		Usage:     "checkpoint artifacts and state: inside an agent run, or directly into the store",
		ArgsUsage: "NAME [PATH...]",
		Description: `Inside an agent run (DAL_MARKS set by dal-exec run or record) this marks a checkpoint:
the artifacts (files, or directories: every file in them) are copied as they are now, and
dal-exec stores the checkpoint when the run ends. It prints the checkpoint's number.

Outside a run it stores the checkpoint at once, in the manual run of the workspace (one per
workspace, its checkpoints numbered on), applying the retention flags, and prints its id: a
way to keep a known-good state of a directory before a risky step.

Examples:
   dal-exec checkpoint save phase-build out/ --state '{"phase": "build", "next": "test"}'
   dal-exec checkpoint save --tag known-good before-refactor src/`,
		Flags: append(flags, cpRetentionFlags(cpCommandNames)...),
		Action: func(c *ucli.Context) error {
			args, err := cpArgs(c)
			if err != nil {
				return err
			}
			if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
				return usageError{Err: errors.New("save needs a checkpoint name, e.g. dal-exec checkpoint save phase-build out/")}
			}
			in := marks.Input{Kind: marks.Checkpoint, Name: args[0], Tag: c.String("tag"), Note: c.String("note"), Paths: args[1:]}
			if in.Tag != "" {
				if err := checkpoint.CheckTag(in.Tag); err != nil {
					return usageError{Err: err}
				}
			}
			if in.State, err = cpState(c); err != nil {
				return err
			}
			if os.Getenv(marks.EnvDir) != "" {
				m, err := writeMark(in)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, m.Seq)
				return nil
			}
			return cpSaveManual(c, in)
		},
	}
}

// cpState reads --state or --state-file.
func cpState(c *ucli.Context) (json.RawMessage, error) {
	s, f := c.String("state"), c.String("state-file")
	if s != "" && f != "" {
		return nil, usageError{Err: errors.New("give the state with --state or --state-file, not both")}
	}
	var b []byte
	switch {
	case s != "":
		b = []byte(s)
	case f == "-":
		var err error
		if b, err = io.ReadAll(os.Stdin); err != nil {
			return nil, fmt.Errorf("reading the state from stdin: %w", err)
		}
	case f != "":
		var err error
		if b, err = os.ReadFile(f); err != nil {
			return nil, usageError{Err: fmt.Errorf("--state-file: %w", err)}
		}
	default:
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, usageError{Err: errors.New("the state is not valid JSON, e.g. --state '{\"phase\": \"build\"}'")}
	}
	return b, nil
}

// cpSaveManual stores a checkpoint outside any agent run.
func cpSaveManual(c *ucli.Context, in marks.Input) error {
	s, err := cpStoreFrom(c, cpCommandNames)
	if err != nil {
		return err
	}
	ws := c.String("workspace")
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return err
		}
	}
	if ws, err = filepath.Abs(ws); err != nil {
		return err
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return usageError{Err: fmt.Errorf("workspace %s is not a directory", ws)}
	}
	tmp, err := os.MkdirTemp("", "dal-checkpoint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	in.Cwd, in.Workspace, in.Runtime, in.PID = "", ws, "shell", os.Getpid()
	now := time.Now()
	in.AtNS = now.UnixNano()
	if _, err := marks.Write(tmp, in); err != nil {
		return err // bad input is a usage error already
	}
	ms, _, err := marks.Read(tmp, marks.Checkpoint)
	if err != nil {
		return err
	}
	res, err := s.Ingest(checkpoint.Run{ID: checkpoint.ManualRunID(ws), Workspace: ws, Mode: "manual",
		Started: now, Finished: now, Manual: true}, ms)
	if err != nil {
		return err
	}
	if len(res.Stored) == 0 {
		return errors.Join(res.Skipped...)
	}
	cp := res.Stored[0]
	fmt.Fprintln(c.App.Writer, cp.ID)
	fmt.Fprintf(c.App.ErrWriter, "saved checkpoint %s (%s): %s, %s compressed, in %s\n",
		cp.ID, cpName(cp.Name), cpPlural(len(cp.Artifacts), "artifact"), cpBytes(cp.ArchiveSize), s.Dir)
	res.Stored = nil // said above
	cpReportIngest(c.App.ErrWriter, s, res)
	return nil
}

func checkpointListCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the stored checkpoints, newest first",
		Description: `Columns: the id (RUN/SEQ), name, tag, when it was stored, the archive's size and the
artifacts' count and size. Exits 1 when a run's manifest is damaged (the others are listed).

Examples:
   dal-exec checkpoint list
   dal-exec checkpoint list --workspace . --json`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "run", Usage: "only this run (an id or a prefix of one)"},
			&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "only checkpoints of this workspace"},
			&ucli.StringFlag{Name: "tag", Usage: "only checkpoints with this tag"},
			&ucli.BoolFlag{Name: "json", Usage: "print the checkpoints as a JSON array"},
			cpStoreFlag(cpCommandNames.store),
		},
		Action: func(c *ucli.Context) error {
			if _, err := cpArgs(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usageError{Err: fmt.Errorf("list takes no arguments; filter with --run, --workspace or --tag")}
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cs, lerr := s.List(checkpoint.Filter{Run: c.String("run"), Workspace: c.String("workspace"), Tag: c.String("tag")})
			if lerr != nil && cs == nil && !errors.Is(lerr, checkpoint.ErrDamaged) {
				return lerr
			}
			w := c.App.Writer
			if c.Bool("json") {
				if cs == nil {
					cs = []checkpoint.Checkpoint{}
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(cs); err != nil {
					return err
				}
			} else if len(cs) == 0 {
				fmt.Fprintf(w, "no checkpoints in %s\n", s.Dir)
			} else {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tTAG\tCREATED\tSIZE\tARTIFACTS")
				for _, cp := range cs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d (%s)\n", cp.ID, cpName(cp.Name), cpDash(cp.Tag),
						cp.Stored.Local().Format("2006-01-02 15:04:05"), cpBytes(cp.ArchiveSize), len(cp.Artifacts), cpBytes(cp.ArtifactBytes()))
				}
				tw.Flush()
			}
			return cpDamagedExit(c, lerr)
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

func checkpointShowCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "show",
		Usage:     "show a checkpoint: its run, archive, state and artifacts",
		ArgsUsage: "ID",
		Description: `Examples:
   dal-exec checkpoint show latest
   dal-exec checkpoint show 20260301-120000-1a2b3c4d/2 --json`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "json", Usage: "print the checkpoint as JSON, with its state"},
			cpStoreFlag(cpCommandNames.store),
		},
		Action: func(c *ucli.Context) error {
			id, err := cpOneID(c, "show")
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cp, err := s.Get(id)
			if err != nil {
				return err
			}
			state, serr := s.State(cp.ID)
			w := c.App.Writer
			if c.Bool("json") {
				out := struct {
					checkpoint.Checkpoint
					State json.RawMessage `json:"state,omitempty"`
				}{cp, state}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
				if serr != nil {
					return serr
				}
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
			row("checkpoint", "%s (%s)", cp.ID, cpName(cp.Name))
			if cp.Tag != "" {
				row("tag", "%s (kept forever)", cp.Tag)
			}
			if cp.Note != "" {
				row("note", "%s", cp.Note)
			}
			row("stored", "%s", cp.Stored.Local().Format(time.RFC3339))
			row("marked at", "%s (the agent's clock)", time.Unix(0, cp.AtNS).UTC().Format(time.RFC3339Nano))
			r := cp.Run
			row("run", "%s%s", r.ID, cpRunOutcome(r))
			if len(r.Command) > 0 {
				row("command", "%s", strings.Join(r.Command, " "))
			}
			row("workspace", "%s", r.Workspace)
			if r.Mode != "" {
				mode := r.Mode
				if r.Seed != nil {
					mode += fmt.Sprintf(", seed %d", *r.Seed)
				}
				row("mode", "%s", mode)
			}
			if r.Bundle != "" {
				row("bundle", "%s", r.Bundle)
			}
			comp := cp.Compression
			if cp.Compacted {
				comp += ", compacted"
			}
			row("archive", "%s (%s, %s)", cp.ArchivePath, cpBytes(cp.ArchiveSize), comp)
			row("sha256", "%s", cp.ArchiveSHA256)
			switch {
			case serr != nil:
				row("state", "unreadable: %s", serr)
			case len(state) <= 512:
				row("state", "%s", state)
			default:
				row("state", "%s, sha256 %s (restore --state-out FILE writes it)", cpBytes(cp.StateSize), cp.StateSHA256)
			}
			row("artifacts", "%s, %s", cpPlural(len(cp.Artifacts), "file"), cpBytes(cp.ArtifactBytes()))
			tw.Flush()
			for _, a := range cp.Artifacts {
				fmt.Fprintf(w, "  %04o  %9s  %.12s  %s\n", a.Mode, cpBytes(a.Size), a.SHA256, a.Path)
			}
			if serr != nil {
				return exitError{1}
			}
			return nil
		},
	}
}

func cpRunOutcome(r checkpoint.Run) string {
	switch {
	case r.Manual:
		return " (saved by hand)"
	case r.Failed:
		return " (failed: all its checkpoints are kept)"
	}
	return ""
}

func checkpointValidateCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "validate",
		Usage:     "check checkpoints against their hashes (all when no id is given); exit 1 naming each damaged one",
		ArgsUsage: "[ID...]",
		Description: `Checks each manifest's checksum, each archive's SHA-256, and after decompression each
artifact's and the state's SHA-256.

Examples:
   dal-exec checkpoint validate
   dal-exec checkpoint validate latest`,
		Flags: []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			ids, err := cpArgs(c)
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			rep, err := s.Check(ids...)
			if err != nil {
				return err
			}
			for _, e := range rep.Damaged {
				fmt.Fprintf(c.App.ErrWriter, "dal-exec: %s\n", e)
			}
			if len(rep.Damaged) > 0 {
				fmt.Fprintf(c.App.Writer, "%d problems; %s checked\n", len(rep.Damaged), cpPlural(rep.Checked, "checkpoint"))
				return exitError{1}
			}
			fmt.Fprintf(c.App.Writer, "%s intact\n", cpPlural(rep.Checked, "checkpoint"))
			return nil
		},
	}
}

func checkpointRestoreCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "restore",
		Usage:     "restore a checkpoint's artifacts (all, or the PATHs named) and print its state",
		ArgsUsage: "ID [PATH...]",
		Description: `Writes the checkpoint's artifacts at their paths into the run's workspace, or --to DIR,
after checking every hash; each file is replaced atomically and files not in the checkpoint
are left alone. Nothing is written when the checkpoint is damaged or a path would leave the
destination. The state goes to stdout (or --state-out FILE); what was restored goes to stderr.

Examples:
   dal-exec checkpoint restore latest
   dal-exec checkpoint restore 20260301-120000-1a2b3c4d/2 --to /tmp/check --state-out state.json
   dal-exec checkpoint restore latest out/report.md`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "restore into this directory instead of the run's workspace"},
			&ucli.StringFlag{Name: "state-out", Usage: "write the state JSON to this file instead of stdout"},
			cpStoreFlag(cpCommandNames.store),
		},
		Action: func(c *ucli.Context) error {
			args, err := cpArgs(c)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return usageError{Err: errors.New("restore needs a checkpoint id, e.g. dal-exec checkpoint restore latest")}
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			res, err := s.Restore(args[0], c.String("to"), checkpoint.RestoreOptions{Paths: args[1:]})
			if err != nil {
				return err
			}
			cp := res.Checkpoint
			var paths []string
			for _, a := range res.Artifacts {
				paths = append(paths, a.Path)
			}
			if len(paths) > 10 {
				paths = append(paths[:10], fmt.Sprintf("and %d more", len(res.Artifacts)-10))
			}
			list := ""
			if len(paths) > 0 {
				list = ": " + strings.Join(paths, ", ")
			}
			fmt.Fprintf(c.App.ErrWriter, "restored %s of checkpoint %s (%s) into %s%s\n",
				cpPlural(len(res.Artifacts), "artifact"), cp.ID, cpName(cp.Name), res.Dir, list)
			if out := c.String("state-out"); out != "" { // null when there is no state: still JSON for a resuming agent
				if err := atomicfile.WriteFile(out, append(res.State, '\n'), 0o644); err != nil {
					return fmt.Errorf("writing the state to %s: %w; the artifacts were restored", out, err)
				}
				fmt.Fprintf(c.App.ErrWriter, "state written to %s\n", out)
				return nil
			}
			if len(res.State) > 0 && string(res.State) != "null" { // no state prints nothing
				fmt.Fprintf(c.App.Writer, "%s\n", res.State)
			}
			return nil
		},
	}
}

func checkpointTagCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "tag",
		Usage:     "tag a checkpoint: retention keeps it forever",
		ArgsUsage: "ID TAG",
		Flags:     []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			args, err := cpArgs(c)
			if err != nil {
				return err
			}
			if len(args) != 2 {
				return usageError{Err: errors.New("tag takes a checkpoint id and a tag, e.g. dal-exec checkpoint tag latest release-1")}
			}
			if err := checkpoint.CheckTag(args[1]); err != nil {
				return usageError{Err: err}
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cp, err := s.Tag(args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "tagged checkpoint %s (%s) %s: retention keeps it forever\n", cp.ID, cpName(cp.Name), cp.Tag)
			return nil
		},
	}
}

func checkpointUntagCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "untag",
		Usage:     "remove a checkpoint's tag: retention treats it as any other",
		ArgsUsage: "ID",
		Flags:     []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			id, err := cpOneID(c, "untag")
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			cp, err := s.Untag(id)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "untagged checkpoint %s (%s)\n", cp.ID, cpName(cp.Name))
			return nil
		},
	}
}

func checkpointPruneCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "prune",
		Usage: "apply the retention policy now (it also runs after every store)",
		Description: `Deletes the checkpoints the policy does not keep, compresses aged ones with --aged compress,
and removes what interrupted writers left behind. Runs whose manifest is damaged are left
alone (exit 1). --dry-run says what would happen.

Examples:
   dal-exec checkpoint prune --dry-run
   dal-exec checkpoint prune --keep 10 --max-age 90d --aged compress`,
		Flags: append([]ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "only say what would be deleted or compressed"},
			cpStoreFlag(cpCommandNames.store),
		}, cpRetentionFlags(cpCommandNames)...),
		Action: func(c *ucli.Context) error {
			if _, err := cpArgs(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return usageError{Err: errors.New("prune takes no arguments")}
			}
			s, err := cpStoreFrom(c, cpCommandNames)
			if err != nil {
				return err
			}
			dry := c.Bool("dry-run")
			var rep *checkpoint.Report
			if dry {
				rep, err = s.Plan(s.Policy, time.Now())
			} else {
				rep, err = s.Prune(s.Policy, time.Now())
			}
			if rep == nil {
				return err
			}
			w := c.App.Writer
			del, comp := "deleted", "compressed"
			if dry {
				del, comp = "would delete", "would compress"
			}
			for _, d := range rep.Deleted {
				fmt.Fprintf(w, "%s %s (%s): %s\n", del, d.ID, cpName(d.Name), d.Reason)
			}
			for _, d := range rep.Compacted {
				fmt.Fprintf(w, "%s %s (%s): %s\n", comp, d.ID, cpName(d.Name), d.Reason)
			}
			freed := "freeing " + cpBytes(rep.Freed)
			if dry && len(rep.Compacted) > 0 {
				freed += " and what compression saves"
			}
			fmt.Fprintf(w, "%s %d, %s %d, kept %d, %s (policy: %s)\n", del, len(rep.Deleted), comp, len(rep.Compacted), rep.Kept, freed, rep.Policy)
			if err != nil {
				return err
			}
			return cpDamagedExit(c, errors.Join(rep.Skipped...))
		},
	}
}

func checkpointRepairCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "repair",
		Usage:     "rebuild a run's damaged or missing manifest from its archives",
		ArgsUsage: "RUN",
		Description: `Every archive carries its checkpoint's metadata. repair checks each archive's content,
rebuilds the manifest from the intact ones and keeps the damaged manifest beside it. Archives
that cannot be recovered are left in place and named (exit 1).

Example:
   dal-exec checkpoint repair 20260301-120000-1a2b3c4d`,
		Flags: []ucli.Flag{cpStoreFlag(cpCommandNames.store)},
		Action: func(c *ucli.Context) error {
			run, err := cpOneID(c, "repair")
			if err != nil {
				return err
			}
			s, err := cpOpenStore(c)
			if err != nil {
				return err
			}
			rep, err := s.Repair(run)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "rebuilt the manifest of run %s: %s recovered", rep.Run, cpPlural(len(rep.Recovered), "checkpoint"))
			if rep.Backup != "" {
				fmt.Fprintf(c.App.Writer, "; the damaged manifest is kept as %s", rep.Backup)
			}
			fmt.Fprintln(c.App.Writer)
			return cpDamagedExit(c, errors.Join(rep.Lost...))
		},
	}
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
