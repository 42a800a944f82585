package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/seedrng"
	"github.com/dal-runtime/dal/vclock"
	ucli "github.com/urfave/cli/v2"
)

// runFlags are shared by every subcommand that starts an agent.
func runFlags() []ucli.Flag {
	return flagList(
		categorize(catRun,
			&ucli.StringFlag{Name: "mode", Value: "strict", EnvVars: []string{"DAL_MODE"},
				Usage: "execution mode: strict (virtual clock, seeded randomness), seeded (real clock logged, seeded randomness), logged (real clock and randomness, all logged), default (real, guard rails only)"},
			&ucli.StringFlag{Name: "seed", Value: "0", EnvVars: []string{"DAL_SEED"},
				Usage: "session seed, a decimal or 0x-hex integer in [0, 2^64)"},
			&ucli.StringFlag{Name: "epoch", Value: vclock.DefaultEpoch.Format(time.RFC3339), EnvVars: []string{"DAL_EPOCH"},
				Usage: "virtual time origin in strict mode (RFC 3339)"},
			&ucli.DurationFlag{Name: "quantum", Value: vclock.DefaultQuantum, EnvVars: []string{"DAL_QUANTUM"},
				Usage: "virtual time added by every clock read in strict mode"},
			&ucli.StringFlag{Name: "cpus", Value: "first", EnvVars: []string{"DAL_CPUS"},
				Usage: "CPUs to pin the agent to: a list like 0 or 0-3,6; first (the first allowed CPU) or all (no pinning)"},
			&ucli.DurationFlag{Name: "timeout", EnvVars: []string{"DAL_TIMEOUT"},
				Usage: "wall-clock limit; when reached the agent's whole process tree is killed and dal-exec exits 124 (0: none)"},
			&ucli.DurationFlag{Name: "stall-limit", Value: sysvirt.DefaultStallLimit, EnvVars: []string{"DAL_STALL_LIMIT"},
				Usage: "strict mode: how long a timed wait may wait in real time for I/O that does not come (a server that never answers) before it expires anyway, reported as an escape; never less than the wait's own timeout"},
			&ucli.StringSliceFlag{Name: "keep-env", EnvVars: []string{"DAL_KEEP_ENV"},
				Usage: "pass an environment variable through to the agent (repeatable; NAME or PREFIX_*); the rest is scrubbed"},
			&ucli.StringFlag{Name: "socket", EnvVars: []string{"DAL_SOCKET"},
				Usage: "dald socket to use (default: a dald running at " + wire.DefaultSocket() + ", else an embedded one)"},
		),
		categorize(catSandbox, append(bindFlags(), limitFlags()...)...),
		categorize(catOutput, metricsTextfileFlag()),
	)
}

// specFromFlags validates the shared flags.
func specFromFlags(c *ucli.Context) (runner.Spec, error) {
	var spec runner.Spec
	spec.Mode = c.String("mode")
	valid := false
	for _, m := range runner.Modes {
		valid = valid || m == spec.Mode
	}
	if !valid {
		return spec, usageError{Err: fmt.Errorf("unknown mode %q: use strict, seeded, logged or default", spec.Mode)}
	}
	seed, err := seedrng.ParseSeed(c.String("seed"))
	if err != nil {
		return spec, usageError{Err: err}
	}
	spec.Seed = seed
	spec.Epoch, err = time.Parse(time.RFC3339Nano, c.String("epoch"))
	if err != nil {
		return spec, usageError{Err: fmt.Errorf("epoch %q is not an RFC 3339 time like 2026-01-01T00:00:00Z", c.String("epoch"))}
	}
	spec.Quantum = c.Duration("quantum")
	if spec.Quantum <= 0 {
		return spec, usageError{Err: fmt.Errorf("quantum %s must be positive, e.g. 1us", spec.Quantum)}
	}
	if spec.CPUs, err = runner.CPUsFlag(c.String("cpus")); err != nil {
		if c.String("cpus") == "first" {
			return spec, err
		}
		return spec, usageError{Err: err}
	}
	spec.Timeout = c.Duration("timeout")
	if spec.Timeout < 0 {
		return spec, usageError{Err: fmt.Errorf("timeout %s is negative", spec.Timeout)}
	}
	spec.StallLimit = c.Duration("stall-limit")
	if spec.StallLimit <= 0 {
		return spec, usageError{Err: fmt.Errorf("stall limit %s must be positive, e.g. 60s", spec.StallLimit)}
	}
	if spec.ReadOnly, spec.Writable, err = bindsFromFlags(c); err != nil {
		return spec, err
	}
	if spec.Limits, err = limitsFromFlags(c); err != nil {
		return spec, err
	}
	spec.KeepEnv = c.StringSlice("keep-env")
	spec.Socket = daldSocket(c, "")
	spec.Args = c.Args().Slice()
	if len(spec.Args) == 0 {
		example := c.Command.HelpName
		if out := c.String("out"); out != "" && c.Command.Name == "record" {
			example += " --out " + shellQuote(out)
		}
		return spec, usageError{Err: fmt.Errorf("no command given: put it after --, e.g. %s -- python3 agent.py", example)}
	}
	return spec, nil
}

// orderResponsesFlag is --order-responses, for the commands that record:
// on by default, --order-responses=false turns it off.
func orderResponsesFlag() ucli.Flag {
	return &ucli.BoolFlag{Name: "order-responses", EnvVars: []string{"DAL_ORDER_RESPONSES"}, Value: true,
		Usage: "hand the agent its responses one at a time, each once its processes have settled, in an order latency cannot change, " +
			"and hold its waits for a response instead of letting them time out on latency (docs/design.md §3.1), so that agents making " +
			"concurrent calls (threads, goroutines, Promise.all, asyncio.gather) record and replay alike; its replay does the same. " +
			"--order-responses=false delivers responses as they come"}
}

// allowAddressFlag is --allow-address, for the commands that record.
func allowAddressFlag() ucli.Flag {
	return &ucli.StringSliceFlag{Name: "allow-address", EnvVars: []string{"DAL_ALLOW_ADDRESS"},
		Usage: "let the proxy connect to an address it refuses by default: a link-local or cloud metadata address, or a machine on a network " +
			"attached to this host (a bridge, another namespace); ADDR (169.254.169.254), CIDR (172.17.0.0/16) or HOST:PORT (repeatable). " +
			"Without it such connections get 403. Machines reached through a router (the internet, 10.0.0.0/8 elsewhere) need nothing"}
}

// allowLoopbackFlag is --allow-loopback, for the commands that record.
func allowLoopbackFlag() ucli.Flag {
	return &ucli.StringSliceFlag{Name: "allow-loopback", EnvVars: []string{"DAL_ALLOW_LOOPBACK"},
		Usage: "let the agent reach this service on this host, HOST:PORT (127.0.0.1:11434, [::1]:8080, localhost:3000; repeatable); " +
			"it is also mirrored at the same address inside the sandbox. Without it the proxy refuses this host's own addresses (403). " +
			"A kept *_BASE_URL variable whose host is loopback allows its port too"}
}

// daldSocket is --socket (or DAL_SOCKET), or fallback when it is the
// socket of the dal session dal-exec runs in: a process of a session
// (DAL_SESSION set) inherits DAL_SOCKET naming its session's own socket,
// which serves that session's processes only, not a dal-exec.
func daldSocket(c *ucli.Context, fallback string) string {
	s := c.String("socket")
	if s != "" && os.Getenv("DAL_SESSION") != "" && s == os.Getenv("DAL_SOCKET") {
		return fallback
	}
	return s
}

// shellQuote is s as one word of a POSIX shell command line: as is when
// it holds only characters no shell treats specially, else single-quoted.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@%+=,-", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxApplyBytesFlag is --max-apply-bytes, for the commands that write a
// bundle's files into a workspace (record's apply, revert).
func maxApplyBytesFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "max-apply-bytes", Value: "8GiB", EnvVars: []string{"DAL_MAX_APPLY_BYTES"},
		Usage: "refuse, writing nothing, to write more file data than this into the workspace (a sparse file counts for its data; e.g. 500MiB, 32GiB)"}
}

// maxApplyBytes reads --max-apply-bytes.
func maxApplyBytes(c *ucli.Context) (int64, error) {
	n, err := bundle.ParseSize(c.String("max-apply-bytes"))
	if err != nil || n == 0 {
		return 0, usageError{Err: fmt.Errorf("--max-apply-bytes %q is not a positive size: give one like 8GiB", c.String("max-apply-bytes"))}
	}
	return n, nil
}

// bindFlags are --ro-bind and --bind: what the sandboxed agent sees of
// the host beyond its private home (docs/reference.md, SECURITY.md).
func bindFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringSliceFlag{Name: "ro-bind", EnvVars: []string{"DAL_RO_BIND"},
			Usage: "show the agent this host path read-only at its own place (repeatable), e.g. a file under your home, which the sandbox hides; dal's signing key stays hidden"},
		&ucli.StringSliceFlag{Name: "bind", EnvVars: []string{"DAL_BIND"},
			Usage: "show the agent this host path read-write at its own place (repeatable); what it writes there reaches the host and, in a record, is not captured"},
	}
}

// bindsFromFlags validates --ro-bind and --bind: existing paths, made
// absolute.
func bindsFromFlags(c *ucli.Context) (ro, rw []string, err error) {
	for _, f := range []struct {
		name string
		out  *[]string
	}{{"ro-bind", &ro}, {"bind", &rw}} {
		for _, p := range c.StringSlice(f.name) {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, nil, usageError{Err: fmt.Errorf("--%s %s: %v", f.name, p, err)}
			}
			if _, err := os.Stat(abs); err != nil {
				return nil, nil, usageError{Err: fmt.Errorf("--%s %s: the path does not exist: name an existing file or directory", f.name, p)}
			}
			if abs == "/" {
				return nil, nil, usageError{Err: fmt.Errorf("--%s /: name a directory below /", f.name)}
			}
			*f.out = append(*f.out, abs)
		}
	}
	return ro, rw, nil
}

// limitFlags are the sandboxed agent's resource limits (sandbox.Limits).
func limitFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "memory", Value: "50%", EnvVars: []string{"DAL_MEMORY"},
			Usage: "each of the agent's processes may allocate this much (512M, 4G, or a share of the RAM like 50%); the private tmpfs mounts hold a quarter of it each (record: /tmp, /var/tmp, /run, /dev/shm; run: /tmp); none: no limit"},
		&ucli.StringFlag{Name: "pids", Value: "4096", EnvVars: []string{"DAL_PIDS"},
			Usage: "the agent's processes and threads at most (enforced when dal-exec is not root); none: no limit"},
		&ucli.StringFlag{Name: "file-size", Value: "4G", EnvVars: []string{"DAL_FILE_SIZE"},
			Usage: "the largest file the agent may write (a write past it fails; SIGXFSZ kills a program that does not expect it); none: no limit"},
	}
}

// limitsFromFlags reads --memory, --pids and --file-size.
func limitsFromFlags(c *ucli.Context) (sandbox.Limits, error) {
	var l sandbox.Limits
	var err error
	if l.Memory, err = parseSize(c.String("memory"), true); err != nil {
		return l, usageError{Err: fmt.Errorf("--memory %s: %v", c.String("memory"), err)}
	}
	if l.FileSize, err = parseSize(c.String("file-size"), false); err != nil {
		return l, usageError{Err: fmt.Errorf("--file-size %s: %v", c.String("file-size"), err)}
	}
	if p := c.String("pids"); p != "none" {
		if l.Pids, err = strconv.ParseInt(p, 10, 64); err != nil || l.Pids < 16 {
			return l, usageError{Err: fmt.Errorf("--pids %s is not a count of at least 16 (or none)", p)}
		}
		if c.IsSet("pids") && os.Geteuid() == 0 {
			// Asked for, and not what it would be: say so once.
			fmt.Fprintln(c.App.ErrWriter, "dal: --pids is not enforced when dal-exec runs as root (uid 0 is exempt from RLIMIT_NPROC, and dal makes no cgroup yet): run dal-exec as an ordinary user for it")
		}
	}
	return l, nil
}

// parseSize reads a size in bytes as bundle.ParseSize does (512M, 4GiB,
// a number of bytes), none (0), or with share a percentage of the
// machine's RAM.
func parseSize(s string, share bool) (int64, error) {
	if s == "none" {
		return 0, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok && share {
		n, err := strconv.ParseFloat(p, 64)
		if err != nil || n <= 0 || n > 100 {
			return 0, errors.New("a share of the RAM is a percentage in (0, 100]")
		}
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err != nil {
			return 0, fmt.Errorf("read the machine's RAM: %v", err)
		}
		return int64(float64(si.Totalram) * float64(si.Unit) * n / 100), nil
	}
	n, err := bundle.ParseSize(s)
	if err != nil {
		return 0, errors.New("not a size like 512M or 4GiB (or none)")
	}
	if n < 1<<20 {
		return 0, errors.New("below 1M: too small for any program")
	}
	return n, nil
}
