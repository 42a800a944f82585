// Package dald is dald's command line: flags, signals, logging, socket
// activation and the eBPF tracer around the server in internal/daemon. It
// is what cmd/dald runs; it holds no protocol logic of its own. It imports
// nothing of dal-exec's (runner, shims), so the dald binary does not carry
// the embedded Python and Node shims.
package dald

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/daemon"
	"github.com/dal-runtime/dal/internal/helptext"
	"github.com/dal-runtime/dal/internal/sdnotify"
	"github.com/dal-runtime/dal/internal/trace"
	"github.com/dal-runtime/dal/internal/version"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/metrics"
	ucli "github.com/urfave/cli/v2"
)

// dald's flag categories, in the order its help shows them.
const (
	catLimits  = "limits"
	catMetrics = "metrics"
)

func init() {
	// urfave/cli prints help through this package variable; dald is its
	// only user in the process.
	ucli.HelpPrinter = helptext.Style{FlagCategories: []string{catLimits, catMetrics}}.Printer()
}

// App builds dald.
func App(stdout, stderr io.Writer) *ucli.App {
	return &ucli.App{
		Name:    "dald",
		Usage:   "serve virtual time and the timer schedule to dal sessions",
		Version: version.Version,
		Description: `dald listens on a Unix socket (mode 0600; only its own user and root may connect). dal-exec
uses it when it is running at the default socket or named with --socket; otherwise dal-exec
embeds one. SIGTERM or SIGINT stops accepting and drains: running sessions finish (up to
--drain-timeout), then dald exits.

Sessions are kept apart by a capability: a process joins a session only with the token
dal-exec gave its agent (DAL_SESSION_TOKEN), and status lists a user's own sessions. What a
client can make dald hold is capped (the --max-* flags and --idle-timeout; at the defaults one
session holds at most about 250 MiB); a refusal names the flag that raises it.

It traces every session's process tree with eBPF (boundary coverage, docs/design.md §8) when it may
(root, or CAP_BPF and CAP_PERFMON, on a kernel with BTF); otherwise it says once why tracing is
off and serves everything else. The eBPF programs are attached only while a traced session is
open: between sessions they cost the machine's processes nothing (dal-exec status, and
dal_tracer_attached in /metrics, say whether they are attached). Prometheus metrics are served at
http://ADDR/metrics, ADDR being --metrics-addr (docs/metrics.md lists them). Under systemd it takes
its socket from socket activation and reports readiness (contrib/systemd).

Examples:
   # listen at the default socket, metrics at http://127.0.0.1:9464/metrics
   dald
   # a dald at a socket of your own, and a run that uses it
   dald --socket /tmp/dald.sock &
   dal-exec run --socket /tmp/dald.sock -- python3 agent.py
   # metrics on every interface, without the Go runtime's
   dald --metrics-addr 0.0.0.0:9464 --no-go-metrics
   # no metrics endpoint
   dald --metrics-addr ""`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "socket", Value: wire.DefaultSocket(), EnvVars: []string{"DAL_SOCKET"},
				Usage: "Unix socket path to listen on"},
			&ucli.IntFlag{Name: "max-frame", Category: catLimits, Value: wire.DefaultMaxFrame, EnvVars: []string{"DAL_MAX_FRAME"},
				Usage: "largest request frame accepted, in bytes; larger frames get an error and the client is dropped"},
			&ucli.IntFlag{Name: "max-conns", Category: catLimits, Value: daemon.DefaultLimits.Conns, EnvVars: []string{"DAL_MAX_CONNS"},
				Usage: "connected clients at once (every agent process holds one); past it a client is told so and dropped"},
			&ucli.IntFlag{Name: "max-sessions", Category: catLimits, Value: daemon.DefaultLimits.Sessions, EnvVars: []string{"DAL_MAX_SESSIONS"},
				Usage: "sessions open at once (one per running dal-exec)"},
			&ucli.IntFlag{Name: "max-session-conns", Category: catLimits, Value: daemon.DefaultLimits.SessionConns, EnvVars: []string{"DAL_MAX_SESSION_CONNS"},
				Usage: "connections one session's processes hold at once on the session's own socket (they do not count against --max-conns)"},
			&ucli.IntFlag{Name: "max-streams", Category: catLimits, Value: daemon.DefaultLimits.Streams, EnvVars: []string{"DAL_MAX_STREAMS"},
				Usage: "shimmed processes per session; past it a process runs on the real clock and the run reports drift"},
			&ucli.IntFlag{Name: "max-spawns", Category: catLimits, Value: daemon.DefaultLimits.Spawns, EnvVars: []string{"DAL_MAX_SPAWNS"},
				Usage: "child names a session may hold reserved and unclaimed (every subprocess a shimmed process starts reserves one)"},
			&ucli.IntFlag{Name: "max-ticks", Category: catLimits, Value: daemon.DefaultLimits.Ticks, EnvVars: []string{"DAL_MAX_TICKS"},
				Usage: "clock ticks and timer entries a session holds (9 bytes each); past it uploads are refused and the run reports drift"},
			&ucli.IntFlag{Name: "max-draw-bytes", Category: catLimits, Value: daemon.DefaultLimits.DrawBytes, EnvVars: []string{"DAL_MAX_DRAW_BYTES"},
				Usage: "bytes of random draws a session holds (logged mode, and draws loaded for replay)"},
			&ucli.DurationFlag{Name: "idle-timeout", Category: catLimits, Value: daemon.DefaultLimits.IdleTimeout, EnvVars: []string{"DAL_IDLE_TIMEOUT"},
				Usage: "close a connection that holds no open session after this long without a request (a session's own connections live as long as it)"},
			&ucli.DurationFlag{Name: "drain-timeout", Category: catLimits, Value: 30 * time.Second, EnvVars: []string{"DAL_DRAIN_TIMEOUT"},
				Usage: "on SIGTERM, how long running sessions may take to finish before they are cut off"},
			&ucli.BoolFlag{Name: "debug", EnvVars: []string{"DAL_DEBUG"}, Usage: "log every dropped client and refused peer"},
			&ucli.StringFlag{Name: "metrics-addr", Category: catMetrics, Value: metrics.DefaultAddr, EnvVars: []string{"DAL_METRICS_ADDR"},
				Usage: "serve Prometheus metrics at http://ADDR/metrics (\"\" = off)"},
			&ucli.BoolFlag{Name: "no-go-metrics", Category: catMetrics, EnvVars: []string{"DAL_NO_GO_METRICS"}, Usage: "leave the Go runtime collector (go_*) out of /metrics"},
			&ucli.BoolFlag{Name: "no-process-metrics", Category: catMetrics, EnvVars: []string{"DAL_NO_PROCESS_METRICS"}, Usage: "leave the process collector (process_*) out of /metrics"},
			&ucli.BoolFlag{Name: "no-trace", EnvVars: []string{"DAL_NO_TRACE"}, Usage: "do not trace sessions with eBPF (no boundary coverage)"},
			&ucli.BoolFlag{Name: "bpf-stats", Category: catMetrics, EnvVars: []string{"DAL_BPF_STATS"},
				Usage: "export the BPF programs' run counts and run time (dal_bpf_program_*); the kernel then times every hook run, about 20-40 ns more per syscall system-wide"},
		},
		Action: serve,
	}
}

func serve(c *ucli.Context) error {
	if c.NArg() > 0 {
		if c.NArg() == 1 && c.Args().First() == "help" {
			return ucli.ShowAppHelp(c)
		}
		return fmt.Errorf("dald takes flags, not arguments (%q is one): see dald --help", c.Args().First())
	}
	level := slog.LevelInfo
	if c.Bool("debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
	path := c.String("socket")
	if c.Int("max-frame") < 64 {
		return fmt.Errorf("--max-frame %d is too small: use at least 64 bytes", c.Int("max-frame"))
	}
	lim := daemon.Limits{Conns: c.Int("max-conns"), Sessions: c.Int("max-sessions"), SessionConns: c.Int("max-session-conns"), Streams: c.Int("max-streams"),
		Spawns: c.Int("max-spawns"), Ticks: c.Int("max-ticks"), DrawBytes: c.Int("max-draw-bytes"), IdleTimeout: c.Duration("idle-timeout")}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-conns", lim.Conns}, {"max-sessions", lim.Sessions}, {"max-session-conns", lim.SessionConns}, {"max-streams", lim.Streams}, {"max-spawns", lim.Spawns},
		{"max-ticks", lim.Ticks}, {"max-draw-bytes", lim.DrawBytes}, {"idle-timeout", int(lim.IdleTimeout / time.Millisecond)}} {
		if f.v < 1 {
			return fmt.Errorf("--%s must be positive: it is a limit, not a switch", f.name)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the socket directory: %w: pick a --socket path in a directory you own", err)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	opts := daemon.Options{MaxFrame: c.Int("max-frame"), Limits: lim, Log: log}
	tracer, off := trace.Open(c.Bool("no-trace"), c.Bool("bpf-stats"))
	if tracer != nil {
		defer tracer.Close()
		opts.Tracer = tracer
		log.Info("boundary tracing on")
	} else {
		opts.TracerOff = off
		log.Warn("boundary tracing is off: " + off)
	}
	addr := c.String("metrics-addr")
	var reg *metrics.Metrics
	if addr != "" {
		mo := metrics.Options{GoCollector: !c.Bool("no-go-metrics"), ProcessCollector: !c.Bool("no-process-metrics"), Routes: newGatePage().Register}
		if tracer != nil {
			mo.BPFStats = func() []metrics.ProgramStats { return programStats(tracer) }
			mo.TracerAttached = tracer.Attached
		}
		reg = metrics.New(mo)
		opts.Metrics = reg
	}
	var srv *daemon.Server
	activated, err := sdnotify.Listeners()
	if err != nil {
		return fmt.Errorf("socket activation: %w", err)
	}
	switch {
	case len(activated) > 1:
		return fmt.Errorf("socket activation passed %d sockets; dald takes one (ListenStream= in dald.socket)", len(activated))
	case len(activated) == 1:
		ul, ok := activated[0].(*net.UnixListener)
		if !ok {
			return fmt.Errorf("socket activation passed a %s socket; dald needs a Unix stream socket", activated[0].Addr().Network())
		}
		srv = daemon.Serve(ul, opts)
		path = ul.Addr().String()
	default:
		if srv, err = daemon.Listen(path, opts); err != nil {
			return err
		}
	}
	var mserver *metrics.Server
	if addr != "" {
		if mserver, err = metrics.Serve(ctx, addr, reg); err != nil {
			srv.Shutdown(context.Background())
			return err
		}
		log.Info("metrics", "url", "http://"+mserver.Addr()+"/metrics")
	}
	log.Info("dald listening", "socket", path, "version", version.Version, "proto", wire.Proto, "pid", os.Getpid())
	sdnotify.Notify(sdnotify.Ready)
	<-ctx.Done()
	sdnotify.Notify(sdnotify.Stopping)
	log.Info("draining", "clients", srv.Clients(), "timeout", c.Duration("drain-timeout"))
	dctx, cancel := context.WithTimeout(context.Background(), c.Duration("drain-timeout"))
	defer cancel()
	if err := srv.Shutdown(dctx); errors.Is(err, context.DeadlineExceeded) {
		log.Warn("drain timed out; remaining clients were disconnected")
	}
	if mserver != nil {
		mserver.Wait()
	}
	log.Info("dald stopped")
	return nil
}

// Main runs dald and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if err := App(stdout, stderr).Run(args); err != nil {
		fmt.Fprintf(stderr, "dald: %s\n", err)
		return 2
	}
	return 0
}

// programStats feeds the metrics' BPF program statistics.
func programStats(t *trace.Tracer) []metrics.ProgramStats {
	st, err := t.Stats()
	if err != nil {
		return nil
	}
	out := make([]metrics.ProgramStats, 0, len(st))
	for _, s := range st {
		out = append(out, metrics.ProgramStats{Name: s.Name, RunCount: s.RunCount, RunTime: s.RunTime})
	}
	return out
}
