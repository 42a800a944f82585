// Package cli is dal-exec's command line: one file per subcommand, each
// exporting its *cli.Command, over internal/runner.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dal-runtime/dal/internal/termsafe"
	"github.com/dal-runtime/dal/internal/usage"
	"github.com/dal-runtime/dal/internal/version"
	ucli "github.com/urfave/cli/v2"
)

// exitError carries an exit code out of an action.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// usageError is a mistake in the command line: the one usage-error type.
type usageError = usage.Error

// App builds dal-exec.
func App(stdout, stderr io.Writer) *ucli.App {
	app := &ucli.App{
		Name:    "dal-exec",
		Usage:   "run an AI agent deterministically: virtual time, seeded randomness, guard rails",
		Version: version.Version,
		Description: `dal-exec wraps any agent process. In strict mode (the default) every clock the agent reads
starts at the epoch and advances only by its own reads, sleeps and timers; every random draw
comes from a stream derived from --seed. Two runs with the same seed print the same bytes.

Without --socket, dal-exec uses a dald already listening at the default socket, or runs one
inside itself: nothing needs to be started first.

Examples:
   dal-exec run -- python3 agent.py
   dal-exec record --out run1 -- python3 agent.py
   dal-exec replay run1`,
		Writer:               stdout,
		ErrWriter:            stderr,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		Commands: []*ucli.Command{
			RunCommand(),
			RecordCommand(),
			ReplayCommand(),
			VerifyCommand(),
			DiffCommand(),
			ShowCommand(),
			RevertCommand(),
			RecoverCommand(),
			KeygenCommand(),
			StatusCommand(),
			ConsistencyCommand(),
			DashboardCommand(),
			IterationCommand(),
			PhaseCommand(),
			CheckpointCommand(),
			ApproveCommand(),
			DenyCommand(),
			HelpCommand(),
		},
		// urfave/cli adds --help only when the app has no command named
		// help; dal-exec's help command is its own (help.go).
		Flags:          []ucli.Flag{ucli.HelpFlag},
		Action:         appAction,
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*ucli.Context, error) {},
	}
	guard(app.Commands)
	return app
}

// Main runs dal-exec with args and returns the process exit code: the
// agent's own, or 2 when dal-exec itself could not do what was asked.
func Main(args []string, stdout, stderr io.Writer) int {
	return exitCode(runApp(args, stdout, stderr), stderr)
}

// runApp runs the command line.
func runApp(args []string, stdout, stderr io.Writer) error {
	// SIGPIPE is deliberately not watched: a signal.Notify for it would
	// turn every write to a socket a client has closed (the recording
	// proxy's, when an agent stops reading a stream) into a signal, which
	// cancelled the run and killed the agent. Left alone, Go ignores
	// SIGPIPE for every descriptor but stdout and stderr, and such writes
	// return EPIPE where they happen, each handled there (the proxy records
	// the early close). signal.Ignore is not used either: the ignored
	// disposition would pass to the agent through exec. A closed stdout or
	// stderr still ends dal-exec, as it ends any Unix filter.
	return App(stdout, stderr).RunContext(context.Background(), args)
}

// exitCode reports err on stderr and returns the exit code it means.
func exitCode(err error, stderr io.Writer) int {
	var ee exitError
	if err == nil {
		return 0
	}
	if errors.As(err, &ee) {
		return ee.code
	}
	if ue, ok := usage.As(err); ok {
		// The user's mistake: its own sentence says what to do; the
		// context layers wrapped around it would only bury it.
		err = ue
	}
	fmt.Fprintf(stderr, "dal-exec: %s\n", termsafe.String(err.Error())) // errors quote bundle and agent text
	return 2
}
