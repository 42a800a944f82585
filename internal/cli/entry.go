package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	dal "github.com/dal-runtime/dal"
	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/termsafe"
)

// fullName is dal-exec with the Rego engine and Prometheus's registry
// built in (cmd/dal-exec-full), installed beside dal-exec.
const fullName = "dal-exec-full"

// buildEnv carries dal-exec's [dal.BuildSum] to the dal-exec-full it
// executes, which removes it from its environment first thing.
const buildEnv = "DAL_EXEC_BUILD"

// Entry is the main of dal-exec and dal-exec-full, after the sandbox's
// init has had its turn: it runs the command line and returns the exit
// status. dal-exec, built without the Rego engine and Prometheus's
// registry (their packages cost every start about 4 ms), hands a command
// that needs one of them to dal-exec-full, which runs it from the start.
func Entry() int {
	runner.NoteInherited() // before any child of dal-exec's own
	// dal-exec lives as long as its agent with a heap of a few MB: the
	// collection its start-up allocations would set off (about 1.5 ms of
	// CPU, while the agent's sandbox starts beside it) is not worth it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	sum, handed := os.LookupEnv(buildEnv)
	if handed {
		os.Unsetenv(buildEnv) // not for the agent
		if err := fromDalExec(sum); err != nil {
			fmt.Fprintf(os.Stderr, "dal-exec: %v\n", err)
			return 2
		}
	}
	if !handed {
		// A run's sandbox starts now, while the command line is parsed.
		runner.Speculate(os.Args)
		defer runner.DropSpeculation()
	}
	return mainOrHandOver(os.Args, os.Stdout, os.Stderr, handed)
}

// isFull says whether this binary is dal-exec-full: its main registered
// the Rego engine and the textfile's registry.
func isFull() bool { return policy.HaveEngine() && textfileMetrics != nil }

// fromDalExec checks that this binary, executed by dal-exec for a command
// that needs it, is dal-exec-full of dal-exec's build (sum).
func fromDalExec(sum string) error {
	if !isFull() {
		return errors.New(fullName + " beside dal-exec has no Rego engine or Prometheus registry (is it a copy of dal-exec?): reinstall both with make install")
	}
	if sum != dal.BuildSum() {
		return errors.New(fullName + " beside dal-exec is of another build: reinstall both with make install (or go install ./cmd/...)")
	}
	return nil
}

// mainOrHandOver is Main, and in dal-exec the hand-over of a command that
// needs dal-exec-full; handed says this process was handed one already.
func mainOrHandOver(args []string, stdout, stderr io.Writer, handed bool) int {
	err := runApp(args, stdout, stderr)
	what := ""
	switch {
	case isFull() || handed:
	case errors.Is(err, policy.ErrNoEngine):
		what = "this command evaluates a Rego policy, which dal-exec leaves to " + fullName
	case errors.Is(err, errNoMetrics):
		what = "--metrics-textfile needs Prometheus's registry, which dal-exec leaves to " + fullName
	}
	if what == "" {
		return exitCode(err, stderr)
	}
	// Nothing was done yet: a command asks for these before it touches
	// anything (loading --policy, opening a bundle's own, checking
	// --metrics-textfile), and what it set up meanwhile it undid on
	// returning the error.
	env := append(os.Environ(), buildEnv+"="+dal.BuildSum())
	runner.DropSpeculation() // dal-exec-full starts its own
	err = sandbox.ExecBeside(fullName, args, env)
	fmt.Fprintf(stderr, "dal-exec: %s, installed beside it: %s; install it with make install (or go install ./cmd/...)\n",
		what, termsafe.String(err.Error()))
	return 2
}
