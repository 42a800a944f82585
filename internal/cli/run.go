package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dal-runtime/dal/internal/checkpoint"
	"github.com/dal-runtime/dal/internal/marks/rundir"

	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/vclock"
	ucli "github.com/urfave/cli/v2"
)

// RunCommand is `dal-exec run`.
func RunCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "run",
		Usage:     "run an agent with guard rails, virtual time and seeded randomness (no bundle)",
		ArgsUsage: "-- CMD [ARGS...]",
		Description: `Runs CMD under dal and exits with its exit code (124 when --timeout kills it, 2 when
dal-exec itself fails). The agent's environment is scrubbed to an allowlist (PATH, HOME,
USER, LOGNAME, SHELL, TERM, TMPDIR) plus --keep-env, and gets the guard rails: AGENT_* variables,
TZ=UTC, LC_ALL=C.UTF-8, PYTHONHASHSEED, GOMAXPROCS, one CPU, and the Python and Node shims. In
strict mode TMPDIR is a fresh directory of the run's own (--keep-env TMPDIR keeps yours). In strict
and seeded modes every process of the agent's tree, whatever its language, runs under dal's syscall
layer (clocks, randomness, pids, file times) in pid, mount, UTS and IPC namespaces of its own, on
your files and with your privileges.

Examples:
   dal-exec run -- python3 agent.py                      strict, seed 0
   dal-exec run --seed 7 -- node agent.js                another seed, other random values
   dal-exec run --mode seeded --clock-out clock.json -- python3 agent.py
   dal-exec run --replay-clock clock.json -- python3 agent.py   in clock.json's mode
   dal-exec run --timeout 30s --keep-env OPENAI_API_KEY -- python3 agent.py
   DAL_SEED=42 dal-exec run -- ./my-go-agent`,
		Flags: flagList(runFlags(),
			categorize(catRun, &ucli.StringFlag{Name: "replay-clock", EnvVars: []string{"DAL_REPLAY_CLOCK"},
				Usage: "serve the real clock readings recorded in this clock.json back to the agent, in order; reads past its end are reported as drift (runs in the mode the log was recorded in)"}),
			categorize(catOutput, &ucli.StringFlag{Name: "clock-out", EnvVars: []string{"DAL_CLOCK_OUT"},
				Usage: "write the run's clock log (clock.json: streams, reads, timers, logged ticks) to this file"}),
			categorize(catIterations, &ucli.StringFlag{Name: "iterations-dir", EnvVars: []string{"DAL_ITERATIONS_DIR"},
				Usage: "where the agent's marked iterations are preserved (default: $XDG_STATE_HOME/dal/iterations/<time>-<pid>)"}),
			gateFlags(false), selectionFlags(), CheckpointFlags()),
		Action: func(c *ucli.Context) error {
			spec, err := specFromFlags(c)
			if err != nil {
				return err
			}
			spec.ClockOut = c.String("clock-out")
			if p := c.String("replay-clock"); p != "" {
				spec.Replay, err = vclock.ReadFile(p)
				if err != nil {
					return usageError{Err: err}
				}
				// The log is replayed in the mode it was recorded in: seeded
				// serves its real-clock readings, strict compares its timer
				// schedule. Another mode would ignore what it holds.
				switch {
				case !c.IsSet("mode"):
					spec.Mode = spec.Replay.Mode
				case spec.Mode != spec.Replay.Mode:
					return usageError{Err: fmt.Errorf("%s was recorded in %s mode, which --mode %s would ignore: use --mode %s, or leave --mode out", p, spec.Replay.Mode, spec.Mode, spec.Replay.Mode)}
				}
			}
			spec.Stdin, spec.Stdout, spec.Stderr, spec.Log = os.Stdin, c.App.Writer, c.App.ErrWriter, c.App.ErrWriter
			figs, err := newFigures(c)
			if err != nil {
				return err
			}
			spec.Metrics = figs.m
			spec.TraceFromExec = 1 // the agent is dal-exec's own child: count from its exec
			// Strict and seeded runs put every process of the agent's
			// tree under the syscall layer, in namespaces of its own.
			spec.Isolate = spec.Mode == "strict" || spec.Mode == "seeded"
			spec.TraceIfObserved = true
			policy, err := selectionFromFlags(c)
			if err != nil {
				return err
			}
			if _, err := RetentionFromFlags(c); err != nil {
				return err
			}
			if err := noGateInRun(c); err != nil {
				return err
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			rm, err := rundir.NewPlain(wd)
			if err != nil {
				return err
			}
			defer rm.Close()
			spec.Env = rm.Vars()
			started := time.Now()
			res, err := runner.Run(c.Context, spec)
			seed := spec.Seed
			run := checkpoint.Run{Command: spec.Args, Workspace: wd, Mode: spec.Mode, Seed: &seed, Started: started,
				Finished: time.Now(), Failed: err != nil || res == nil || res.ExitCode != 0 || res.TimedOut}
			if _, cerr := StoreCheckpoints(c, run, rm.Dir, c.App.ErrWriter); cerr != nil {
				fmt.Fprintf(c.App.ErrWriter, "dal: the run's checkpoints were not stored: %v\n", cerr)
			}
			if err != nil {
				return err
			}
			keep := c.String("iterations-dir")
			if keep == "" {
				keep = filepath.Join(stateHome(), "dal", "iterations", time.Now().UTC().Format("20060102T150405")+"-"+strconv.Itoa(os.Getpid()))
			}
			if _, err := rm.FinishIterations(policy, keep, c.App.ErrWriter); err != nil {
				return err
			}
			if err := figs.publish(); err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return exitError{res.ExitCode}
			}
			return nil
		},
	}
}

// stateHome is $XDG_STATE_HOME, else ~/.local/state.
func stateHome() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state")
	}
	return filepath.Join(os.TempDir(), "dal-state")
}
