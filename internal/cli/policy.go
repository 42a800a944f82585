package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/policy"
	"github.com/dal-runtime/dal/internal/policy/gate"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/termsafe"
	ucli "github.com/urfave/cli/v2"
)

// gateFlags are the policy gate's flags of record, replay, run and
// consistency (docs/policy.md).
func gateFlags(replay bool) []ucli.Flag {
	flags := []ucli.Flag{
		&ucli.StringFlag{Name: "policy", EnvVars: []string{"DAL_POLICY"},
			Usage: "decide the agent's HTTP requests, execs and loopback connects with this Rego policy (a .rego file or a directory of them; package dal, decision {action: allow|deny|ask, reason}; see docs/policy.md)"},
		&ucli.StringFlag{Name: "policy-default", Value: "allow", EnvVars: []string{"DAL_POLICY_DEFAULT"},
			Usage: "the action where the policy's decision is undefined: allow or deny"},
	}
	if replay {
		flags[0].(*ucli.StringFlag).Usage = "evaluate this Rego policy beside the recorded decisions and report where it decides otherwise (default: the bundle's own policy)"
		return categorize(catSandbox, flags...)
	}
	flags = append(flags, &ucli.DurationFlag{Name: "ask-timeout", Value: policy.DefaultAskTimeout, EnvVars: []string{"DAL_ASK_TIMEOUT"},
		Usage: "how long a call the policy asks about waits for a person (dal-exec approve/deny, the terminal, dald's Gate page) before it is denied"})
	return categorize(catSandbox, flags...)
}

// gateFromFlags compiles --policy before the agent starts: a policy that
// does not compile, or whose decision has the wrong shape, is a usage
// error (exit 2) naming the file and line.
func gateFromFlags(c *ucli.Context) (record.Policy, error) {
	return loadGate(c, true)
}

// loadGate is gateFromFlags; ask is false for a replay, which never asks.
func loadGate(c *ucli.Context, ask bool) (record.Policy, error) {
	var o record.Policy
	def, err := policy.ParseAction(c.String("policy-default"))
	if err != nil || def == policy.Ask {
		return o, usageError{Err: fmt.Errorf("--policy-default %s: use allow or deny", c.String("policy-default"))}
	}
	if c.IsSet("ask-timeout") && c.Duration("ask-timeout") <= 0 {
		return o, usageError{Err: fmt.Errorf("--ask-timeout %s must be positive, e.g. 5m", c.Duration("ask-timeout"))}
	}
	o.AskTimeout = c.Duration("ask-timeout")
	path := c.String("policy")
	if path == "" {
		return o, nil
	}
	p, err := policy.Load(c.Context, path, def)
	if err != nil {
		return o, usageError{Err: err}
	}
	o.Policy = p
	// Asks are put at dal-exec's terminal too, unless the agent reads it:
	// the sandbox relays that terminal's keys to the agent, and the two
	// would race for each answer.
	if ask && runner.IsTerminal(os.Stderr) && !runner.IsTerminal(os.Stdin) {
		if tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
			o.Terminal = tty
		}
	}
	return o, nil
}

// ApproveCommand is `dal-exec approve`.
func ApproveCommand() *ucli.Command { return decideCommand(true) }

// DenyCommand is `dal-exec deny`.
func DenyCommand() *ucli.Command { return decideCommand(false) }

func decideCommand(approve bool) *ucli.Command {
	name, verb, past := "approve", "let", "approved"
	if !approve {
		name, verb, past = "deny", "refuse", "denied"
	}
	return &ucli.Command{
		Name:      name,
		Usage:     verb + " a call a running agent's policy asked about (--policy with action ask)",
		ArgsUsage: "ID | --list",
		Description: `A policy's ask holds the agent's call (an HTTP request, an exec, a connect) until a person
decides: at dal-exec's terminal, with dal-exec approve ID or dal-exec deny ID from another shell
of the same user (or root), or on dald's Gate page. dal-exec prints the ID when it asks;
--list shows every pending call of your runs. The decision, who made it and when go into the
run's bundle (policy.json). A call nobody decides is denied after --ask-timeout (5m).

Examples:
   dal-exec ` + name + ` --list
   dal-exec ` + name + ` 48213.1
   dal-exec ` + name + ` --reason "reviewed the payload" 48213.2`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "list", Usage: "list the pending calls of your running agents"},
			&ucli.StringFlag{Name: "reason", Usage: "why, kept with the decision in the bundle"},
		},
		Action: func(c *ucli.Context) error {
			ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
			defer cancel()
			if c.Bool("list") {
				return listPending(ctx, c)
			}
			if c.NArg() != 1 {
				return usageError{Err: fmt.Errorf("dal-exec %s takes one request ID, e.g. dal-exec %s 48213.1 (dal-exec %s --list shows them)", name, name, name)}
			}
			id := c.Args().First()
			err := gate.Decide(ctx, gate.Dir(), id, approve, "dal-exec "+name, c.String("reason"))
			if errors.Is(err, gate.ErrUnknown) {
				return usageError{Err: fmt.Errorf("no pending call has the ID %s (decided already?): dal-exec %s --list shows the pending ones", id, name)}
			}
			if err != nil {
				return usageError{Err: err}
			}
			fmt.Fprintf(c.App.Writer, "%s %s\n", past, id)
			return nil
		},
	}
}

func listPending(ctx context.Context, c *ucli.Context) error {
	runs := gate.List(ctx, gate.Dir())
	n := 0
	w := c.App.Writer
	for _, r := range runs {
		for _, p := range r.Pending {
			n++
			fmt.Fprintf(w, "%s\t%s %s\t%s\t(run: %s, waiting since %s)\n", p.ID, p.Kind, termsafe.Line(p.Summary),
				termsafe.Line(p.Reason), termsafe.Line(r.Run), p.Since.Local().Format(time.TimeOnly))
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "no pending calls")
	}
	return nil
}

// gateArgs passes the policy flags on to a child dal-exec record.
func gateArgs(c *ucli.Context) []string {
	var out []string
	for _, f := range []string{"policy", "policy-default"} {
		if v := c.String(f); c.IsSet(f) && v != "" {
			out = append(out, "--"+f, v)
		}
	}
	if c.IsSet("ask-timeout") {
		out = append(out, "--ask-timeout", c.Duration("ask-timeout").String())
	}
	return out
}

// noGateInRun refuses --policy on dal-exec run, which has neither the
// proxy nor the sandbox the gate works through.
func noGateInRun(c *ucli.Context) error {
	if _, err := gateFromFlags(c); err != nil {
		return err
	}
	if c.String("policy") != "" {
		return usageError{Err: errors.New("dal-exec run has no proxy or sandbox for --policy to gate: use dal-exec record --no-apply --policy " +
			strings.ReplaceAll(c.String("policy"), " ", `\ `) + " -- ..., the same run with the gate and a bundle")}
	}
	return nil
}
