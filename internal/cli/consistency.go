package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/consistency"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/seedrng"
	ucli "github.com/urfave/cli/v2"
)

// ConsistencyCommand is `dal-exec consistency`.
func ConsistencyCommand() *ucli.Command {
	flags := []ucli.Flag{}
	for _, f := range runFlags() {
		switch f.Names()[0] {
		case "metrics-textfile":
			continue
		case "seed":
			f = &ucli.StringFlag{Name: "seed", Value: "0", EnvVars: []string{"DAL_SEED"},
				Usage: "base seed the per-run seeds are derived from, a decimal or 0x-hex integer in [0, 2^64)"}
		}
		flags = append(flags, f)
	}
	flags = append(flags, gateFlags(false)...)
	flags = append(flags,
		&ucli.IntFlag{Name: "runs", Aliases: []string{"n"}, EnvVars: []string{"DAL_RUNS"},
			Usage: "how many runs (default: the number of --seeds)"},
		&ucli.StringFlag{Name: "seeds", EnvVars: []string{"DAL_SEEDS"},
			Usage: "explicit per-run seeds, comma-separated (instead of deriving them from --seed)"},
		&ucli.IntFlag{Name: "parallel", Aliases: []string{"p"}, Value: 1, EnvVars: []string{"DAL_PARALLEL"},
			Usage: "record at most this many runs at once"},
		&ucli.StringFlag{Name: "strategy", Value: string(consensus.Majority), EnvVars: []string{"DAL_STRATEGY"},
			Usage: "consensus strategy: majority (more than half of the runs), plurality (the most common answer), weighted, unanimous, threshold or best-of-n; a tie is never a decision"},
		&ucli.Float64Flag{Name: "threshold", Value: consensus.DefaultThreshold, EnvVars: []string{"DAL_THRESHOLD"},
			Usage: "share of runs the threshold strategy needs, in (0, 1]"},
		&ucli.StringFlag{Name: "exclude-outliers", Value: "none", EnvVars: []string{"DAL_EXCLUDE_OUTLIERS"},
			Usage: "leave successful runs with outlying duration or tokens out of the vote: none, modified-z or tukey"},
		&ucli.StringFlag{Name: "verify", EnvVars: []string{"DAL_VERIFY"},
			Usage: "shell command that decides a run's success (exit 0), instead of the agent's exit code"},
		&ucli.StringFlag{Name: "score", EnvVars: []string{"DAL_SCORE"},
			Usage: "shell command that prints a run's quality score, a number in [0, 1]"},
		&ucli.StringFlag{Name: "score-file", EnvVars: []string{"DAL_SCORE_FILE"},
			Usage: "a file (relative to the workspace) in which the agent writes its own quality score, a number in [0, 1]; without --score and --score-file an agent that marks iterations is scored by its selected iteration"},
		&ucli.StringFlag{Name: "answer", EnvVars: []string{"DAL_ANSWER"},
			Usage: "shell command that prints a run's answer, what runs vote on (gets the variables of --verify); default: the run's stdout"},
		&ucli.StringFlag{Name: "answer-file", EnvVars: []string{"DAL_ANSWER_FILE"},
			Usage: "a file (relative to the workspace) in which the agent writes its answer, read from the run's bundle"},
		&ucli.StringFlag{Name: "answer-json", EnvVars: []string{"DAL_ANSWER_JSON"},
			Usage: "a JSON path ($.final.answer, $.choices[0].text) to the answer in stdout, the --answer-file or the --answer output"},
		&ucli.StringSliceFlag{Name: "label",
			Usage: "KEY=VALUE naming what is evaluated, kept in report.json and shard.json (repeatable); framework and task are what dal-exec dashboard groups by, e.g. --label framework=langgraph --label task=bug_fixing"},
		&ucli.StringFlag{Name: "shard", EnvVars: []string{"DAL_SHARD"},
			Usage: "record only shard K of N (runs K, K+N, K+2N, ...) and write DIR/shard.json; join the shards with consistency merge"},
		&ucli.StringFlag{Name: "report", Aliases: []string{"r"}, EnvVars: []string{"DAL_REPORT"},
			Usage: "(required) directory for the run bundles (runs/NNN), report.json, report.md and report.html; finished runs there are kept"},
		&ucli.StringFlag{Name: "workspace", Aliases: []string{"w"}, EnvVars: []string{"DAL_WORKSPACE"},
			Usage: "the directory the agent works in (default: the current directory); runs never change it"},
		&ucli.StringFlag{Name: "key", EnvVars: []string{"DAL_KEY"},
			Usage: "ed25519 signing key (default: ~/.config/dal/signing.key, created on first use)"},
		allowLoopbackFlag(),
		allowAddressFlag(),
		&ucli.StringSliceFlag{Name: "secret-env", EnvVars: []string{"DAL_SECRET_ENV"},
			Usage: "treat this kept variable as a secret although its name does not say so (repeatable; as for record)"},
	)
	flags = append(flags, jsonFlag("the report (report.json)"))
	return &ucli.Command{
		Name:        "consistency",
		Usage:       "run an agent N times, each recorded, and report how consistent the runs are",
		ArgsUsage:   "--runs N --report DIR -- CMD [ARGS...]",
		Subcommands: []*ucli.Command{ConsistencyMergeCommand(), ConsistencyCompareCommand()},
		Description: `Records CMD --runs times as dal-exec record --no-apply does, each run with its own seed, into
DIR/runs/001, 002, ..., then reports on them in DIR/report.json, report.md and report.html (plots,
self-contained, renders offline): the consensus of
the runs' answers (their standard output, or --answer, --answer-file, --answer-json), the tally
per answer, the success rate with its Wilson
interval, mean, spread and outliers of durations, tokens and scores, and a reliability score
(0.6 success rate + 0.2 (1 - CV duration) + 0.2 (1 - CV tokens); High >= 0.8, Medium >= 0.6).

Run i's seed is the first 8 bytes of the dal stream (--seed, "consistency/run/<i>"), or the i-th of
--seeds. A run succeeded when the agent exited 0, or with --verify when that command exits 0. The
--verify and --score commands run with DAL_RUN_INDEX, DAL_RUN_SEED, DAL_RUN_BUNDLE and
DAL_RUN_EXIT_CODE set. The agents' output goes to their bundles only; one line per finished run
goes to stderr. Running again into the same DIR keeps the finished runs and records the rest.

majority needs more than half of the runs (failed runs count), plurality the most common
answer; a tie for the lead is never a decision. A run whose answer cannot be read failed.

--shard K/N records runs K, K+N, ... only (seeds depend on the run index alone) and writes
DIR/shard.json, signed with --key in DIR/shard.sig, instead of a report; dal-exec consistency
merge --report OUT DIR... checks the shards and their bundles and writes the report one machine
would have written (docs/consistency.md).

Exits 0 when the runs reach a consensus, 1 when they do not, 2 when dal-exec itself fails;
a shard exits 0 once its runs are recorded.

Examples:
   dal-exec consistency --runs 10 --seed 7 --report eval -- python3 agent.py
   dal-exec consistency --seeds 42,123,456 --strategy unanimous --report eval -- ./agent.sh
   dal-exec consistency --runs 20 --parallel 4 --timeout 2m --verify 'test -s out.txt' --report eval -- node agent.js
   dal-exec consistency --runs 9 --answer-json '$.final.answer' --report eval -- python3 agent.py
   dal-exec consistency --runs 10 --label framework=langgraph --label task=codegen --report eval -- python3 agent.py
   dal-exec consistency --runs 1000 --shard 3/10 --report shard3 -- python3 agent.py`,
		Flags: flags,
		Action: func(c *ucli.Context) error {
			// --report is checked here, not as a required flag: that would
			// be asked of the merge and compare subcommands too.
			if c.String("report") == "" {
				return usageError{Err: fmt.Errorf("consistency needs --report DIR, the directory for the runs and the report: see the examples in dal-exec help consistency")}
			}
			spec, err := specFromFlags(c)
			if err != nil {
				return err
			}
			seeds, err := consistencySeeds(c)
			if err != nil {
				return err
			}
			if gp, err := loadGate(c, false); err != nil {
				return err
			} else if gp.Policy != nil && c.Int("parallel") > 1 {
				fmt.Fprintln(c.App.ErrWriter, "dal: with --policy and --parallel, several runs may ask at once: answer each with dal-exec approve/deny ID")
			}
			strategy, err := consensus.ParseStrategy(c.String("strategy"))
			if err != nil {
				return usageError{Err: err}
			}
			th := c.Float64("threshold")
			if !(th > 0 && th <= 1) {
				return usageError{Err: fmt.Errorf("threshold %v must be in (0, 1], e.g. 0.67", th)}
			}
			method, err := consensus.ParseOutlierMethod(c.String("exclude-outliers"))
			if err != nil {
				return usageError{Err: err}
			}
			if c.Int("parallel") < 1 {
				return usageError{Err: fmt.Errorf("parallel %d must be at least 1", c.Int("parallel"))}
			}
			answer := consistency.AnswerSource{Command: c.String("answer"), File: c.String("answer-file"), JSON: c.String("answer-json")}
			if err := answer.Check(); err != nil {
				return usageError{Err: err}
			}
			labels, err := consistency.ParseLabels(c.StringSlice("label"))
			if err != nil {
				return usageError{Err: err}
			}
			var shard consistency.Shard
			if c.IsSet("shard") {
				if c.Bool("json") {
					return usageError{Err: fmt.Errorf("--json prints the report, which a shard does not write: drop --json, and merge the shards with dal-exec consistency merge --json")}
				}
				if shard, err = consistency.ParseShard(c.String("shard")); err != nil {
					return usageError{Err: err}
				}
				if shard.Count > len(seeds) {
					return usageError{Err: fmt.Errorf("--shard %s: %d shards for %d runs would leave shards without a run; use at most %d shards", shard, shard.Count, len(seeds), len(seeds))}
				}
			}
			dir := c.String("report")
			if err := consistency.CheckDir(dir); err != nil {
				return err
			}
			rec, key, err := childRecorder(c)
			if err != nil {
				return err
			}
			o := consistency.Options{Dir: dir, Command: spec.Args, Mode: spec.Mode,
				Seeds: seeds, Parallel: c.Int("parallel"), Strategy: strategy,
				Consensus: consensus.Options{Threshold: th, Exclude: consensus.Exclusion{Method: method}},
				Verify:    c.String("verify"), Score: c.String("score"), ScoreFile: c.String("score-file"),
				Answer: answer, Shard: shard, Key: key, Record: rec, Progress: c.App.ErrWriter, Labels: labels}
			total := len(seeds)
			if shard.Count > 0 {
				total = (len(seeds) - shard.Index + shard.Count) / shard.Count
			}
			var bar *progressBar
			if isTerminal(c.App.ErrWriter) {
				bar = newProgressBar(c.App.ErrWriter, "runs", total)
				o.Progress, o.OnProgress = bar, bar.Update
			}
			// An interrupt stops the evaluation between runs' bundles: the
			// finished ones are kept for the next evaluation to resume.
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := consistency.Evaluate(ctx, o)
			if bar != nil {
				bar.Finish()
			}
			if err != nil {
				return err
			}
			w := c.App.Writer
			if shard.Count > 0 {
				fmt.Fprintf(w, "shard %s: %s recorded in %s; merge all %d shards with: dal-exec consistency merge --report OUT DIR...\n",
					shard, plural.Count(total, "run", "runs"), dir, shard.Count)
				return nil
			}
			if c.Bool("json") {
				w = c.App.ErrWriter
			}
			fmt.Fprint(w, rep.Summary())
			fmt.Fprintf(w, "report: %s, %s, %s\n", dir+"/report.json", dir+"/report.md", dir+"/report.html")
			if c.Bool("json") {
				data, err := rep.JSON()
				if err != nil {
					return err
				}
				if _, err := c.App.Writer.Write(data); err != nil {
					return err
				}
			}
			if code := rep.ExitCode(); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}

// childRecorder records each run with a dal-exec record child process: the
// runner reaps orphans as a subreaper (wait4(-1)), so two runs in one
// process would take each other's exit statuses. The child gets the
// user's runner flags and --no-apply; its output goes nowhere but the
// bundle. A run whose bundle was written succeeded as a recording, whatever
// the agent's exit code; without a bundle the child's last message is the
// error. The signing key it returns is the children's, which also signs
// a shard's shard.json.
func childRecorder(c *ucli.Context) (consistency.Recorder, ed25519.PrivateKey, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot find dal-exec itself to record runs: %w", err)
	}
	key := c.String("key")
	if key == "" {
		key = bundle.DefaultKeyPath()
	}
	// Create the signing key once, not racily in parallel children.
	priv, created, err := bundle.LoadOrCreateKey(key)
	if err != nil {
		return nil, nil, err
	} else if created {
		fmt.Fprintf(c.App.ErrWriter, "dal: created a signing key at %s (keep it; bundles are signed with it)\n", key)
	}
	base := []string{"record", "--no-apply", "--key", key, "--mode", c.String("mode"), "--epoch", c.String("epoch"),
		"--quantum", c.Duration("quantum").String(), "--cpus", c.String("cpus"), "--timeout", c.Duration("timeout").String(), "--stall-limit", c.Duration("stall-limit").String()}
	base = append(base, gateArgs(c)...)
	for _, f := range []string{"keep-env", "allow-loopback", "allow-address", "secret-env", "ro-bind", "bind"} {
		for _, v := range c.StringSlice(f) {
			base = append(base, "--"+f, v)
		}
	}
	for _, name := range []string{"socket", "workspace", "memory", "pids", "file-size"} {
		if v := c.String(name); v != "" {
			base = append(base, "--"+name, v)
		}
	}
	agent := c.Args().Slice()
	return func(ctx context.Context, r consistency.RunSpec) error {
		args := append(slices.Clone(base), "--seed", strconv.FormatUint(r.Seed, 10), "--out", r.Bundle, "--")
		cmd := exec.CommandContext(ctx, self, append(args, agent...)...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		runErr := cmd.Run()
		if _, err := os.Stat(filepath.Join(r.Bundle, bundle.ManifestFile)); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		msg = strings.TrimPrefix(msg, "dal-exec: ")
		if msg == "" && runErr != nil {
			msg = runErr.Error()
		}
		return fmt.Errorf("recording failed: %s", msg)
	}, priv, nil
}

// consistencySeeds reads --runs, --seed and --seeds.
func consistencySeeds(c *ucli.Context) ([]uint64, error) {
	runs := c.Int("runs")
	if list := c.String("seeds"); list != "" {
		if c.IsSet("seed") {
			return nil, usageError{Err: fmt.Errorf("give either --seed (a base seed) or --seeds (one per run), not both")}
		}
		var seeds []uint64
		for _, f := range strings.Split(list, ",") {
			s, err := seedrng.ParseSeed(strings.TrimSpace(f))
			if err != nil {
				return nil, usageError{Err: fmt.Errorf("--seeds: %w", err)}
			}
			seeds = append(seeds, s)
		}
		if c.IsSet("runs") && runs != len(seeds) {
			return nil, usageError{Err: fmt.Errorf("--runs %d but --seeds lists %d seeds", runs, len(seeds))}
		}
		return seeds, nil
	}
	if runs < 1 {
		return nil, usageError{Err: fmt.Errorf("how many runs? give --runs N (at least 1) or --seeds")}
	}
	base, err := seedrng.ParseSeed(c.String("seed"))
	if err != nil {
		return nil, usageError{Err: err}
	}
	return consistency.Seeds(base, runs), nil
}
