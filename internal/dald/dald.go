// Package dald is the dald command line: flags, signals and logging around
// internal/daemon.
package dald

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/daemon"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/version"
	"github.com/dal-runtime/dal/internal/wire"
	ucli "github.com/urfave/cli/v2"
)

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

Examples:
   dald                                     listen at the default socket
   dald --socket /tmp/dald.sock &           and then:
   dal-exec run --socket /tmp/dald.sock -- python3 agent.py`,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "socket", Value: runner.DefaultSocket(), EnvVars: []string{"DAL_SOCKET"},
				Usage: "Unix socket path to listen on"},
			&ucli.IntFlag{Name: "max-frame", Value: wire.DefaultMaxFrame, EnvVars: []string{"DAL_MAX_FRAME"},
				Usage: "largest request frame accepted, in bytes; larger frames get an error and the client is dropped"},
			&ucli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, EnvVars: []string{"DAL_DRAIN_TIMEOUT"},
				Usage: "on SIGTERM, how long running sessions may take to finish before they are cut off"},
			&ucli.BoolFlag{Name: "debug", EnvVars: []string{"DAL_DEBUG"}, Usage: "log every dropped client and refused peer"},
		},
		Action: serve,
	}
}

func serve(c *ucli.Context) error {
	level := slog.LevelInfo
	if c.Bool("debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
	path := c.String("socket")
	if c.Int("max-frame") < 64 {
		return fmt.Errorf("--max-frame %d is too small: use at least 64 bytes", c.Int("max-frame"))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the socket directory: %w: pick a --socket path in a directory you own", err)
	}
	srv, err := daemon.Listen(path, daemon.Options{MaxFrame: c.Int("max-frame"), Log: log})
	if err != nil {
		return err
	}
	log.Info("dald listening", "socket", path, "version", version.Version, "proto", wire.Proto, "pid", os.Getpid())
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	log.Info("draining", "clients", srv.Clients(), "timeout", c.Duration("drain-timeout"))
	dctx, cancel := context.WithTimeout(context.Background(), c.Duration("drain-timeout"))
	defer cancel()
	if err := srv.Shutdown(dctx); errors.Is(err, context.DeadlineExceeded) {
		log.Warn("drain timed out; remaining clients were disconnected")
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
