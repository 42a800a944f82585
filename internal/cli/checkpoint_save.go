package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/checkpoint"
	"github.com/dal-runtime/dal/internal/marks"
	ucli "github.com/urfave/cli/v2"
)

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
