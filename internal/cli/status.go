package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/dal-runtime/dal/internal/plural"
	"github.com/dal-runtime/dal/internal/wire"
	ucli "github.com/urfave/cli/v2"
)

// StatusCommand is `dal-exec status`.
func StatusCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "status",
		Usage: "show a running dald's version, uptime and open sessions",
		Description: `Asks the dald at --socket (default: the default socket) for its status. It lists the
sessions your user opened (root sees every session); a session id alone grants nothing: a
process joins a session only with the token dal-exec gave its agent.

Examples:
   dal-exec status
   dal-exec status --socket /tmp/dald.sock --json`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "socket", Value: wire.DefaultSocket(), EnvVars: []string{"DAL_SOCKET"}, Usage: "dald socket"},
			&ucli.BoolFlag{Name: "json", Usage: "print the status as JSON"},
		},
		Action: func(c *ucli.Context) error {
			path := daldSocket(c, wire.DefaultSocket())
			cl, _, err := wire.Dial(path, wire.Request{Role: wire.RoleCtl})
			if err != nil {
				if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
					return fmt.Errorf("no dald answers at %s: start one with `dald --socket %s` (dal-exec run embeds its own when none runs)", path, path)
				}
				return err
			}
			defer cl.Close()
			rep, err := cl.Call(wire.Request{Op: wire.OpStatus})
			if err != nil {
				return err
			}
			w := c.App.Writer
			if c.Bool("json") {
				return json.NewEncoder(w).Encode(map[string]any{"version": rep.Version, "proto": rep.Proto,
					"pid": rep.PID, "uptime_s": rep.UptimeS, "sessions": rep.Sessions, "tracing": rep.Tracing, "tracing_off": rep.Reason,
					"tracer_attached": rep.Attached})
			}
			fmt.Fprintf(w, "dald %s (protocol %d), pid %d, up %.0f s, socket %s\n", rep.Version, rep.Proto, rep.PID, rep.UptimeS, path)
			switch {
			case rep.Tracing && rep.Attached:
				fmt.Fprintln(w, "boundary tracing on (eBPF), hooks attached: a traced session is open")
			case rep.Tracing:
				fmt.Fprintln(w, "boundary tracing on (eBPF), hooks detached: no traced session is open, processes pay nothing")
			default:
				fmt.Fprintf(w, "boundary tracing off: %s\n", rep.Reason)
			}
			fmt.Fprintln(w, plural.Count(len(rep.Sessions), "open session", "open sessions"))
			for _, s := range rep.Sessions {
				fmt.Fprintf(w, "  %s  mode %-7s seed %-20d streams %d (live %d)  drift %d\n", s.ID, s.Mode, s.Seed, s.Streams, s.Live, s.Drift)
			}
			return nil
		},
	}
}
