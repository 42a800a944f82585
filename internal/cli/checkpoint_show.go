package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

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
