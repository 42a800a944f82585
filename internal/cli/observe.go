package cli

import (
	"errors"
	"time"

	"github.com/dal-runtime/dal/internal/daemon"
	"github.com/dal-runtime/dal/internal/wire"
	ucli "github.com/urfave/cli/v2"
)

// metricsTextfileFlag is --metrics-textfile, on every command that measures
// something.
func metricsTextfileFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "metrics-textfile", EnvVars: []string{"DAL_METRICS_TEXTFILE"},
		Usage: "also write this run's metrics (listed in docs/metrics.md) to a node_exporter textfile, e.g. /var/lib/node_exporter/textfile/dal.prom"}
}

// figures carries what a command measured to Prometheus: into the
// --metrics-textfile, and to a running dald's /metrics.
type figures struct {
	m      daemon.Metrics // nil without --metrics-textfile
	path   string
	socket string // a running dald to tell ("" = the default one, if any)
	send   []wire.Request
}

// newFigures checks --metrics-textfile before anything runs.
func newFigures(c *ucli.Context) (*figures, error) {
	f := &figures{path: c.String("metrics-textfile")}
	if c.IsSet("socket") {
		f.socket = daldSocket(c, "")
	}
	if f.path != "" {
		if textfileMetrics == nil {
			return nil, errNoMetrics
		}
		m, err := textfileMetrics(f.path)
		if err != nil {
			return nil, usageError{Err: err}
		}
		f.m = m
	}
	return f, nil
}

// textfileMetrics checks the path of --metrics-textfile and makes the
// registry written there (package metrics, on Prometheus's client
// library). dal-exec-full registers it ([SetTextfileMetrics]); dal-exec,
// which starts about a millisecond sooner without Prometheus's packages,
// hands a command with --metrics-textfile to dal-exec-full (entry.go).
var textfileMetrics func(path string) (daemon.Metrics, error)

// SetTextfileMetrics registers what makes --metrics-textfile's registry.
func SetTextfileMetrics(f func(path string) (daemon.Metrics, error)) { textfileMetrics = f }

// errNoMetrics is newFigures' error without a registry for the textfile.
var errNoMetrics = errors.New("--metrics-textfile needs Prometheus's registry, and this dal-exec is built without it: run the command with dal-exec-full, installed beside dal-exec by make install")

func (f *figures) replay(fidelity float64) {
	if f.m != nil {
		f.m.ObserveReplay(fidelity)
	}
	f.send = append(f.send, wire.Request{Op: wire.OpObserve, What: "replay", Value: fidelity})
}

func (f *figures) coverage(ratio float64, escapes map[string]int) {
	if f.m != nil {
		f.m.ObserveCoverage(ratio, escapes)
	}
	counts := map[string]int64{}
	for k, v := range escapes {
		counts[k] = int64(v)
	}
	f.send = append(f.send, wire.Request{Op: wire.OpObserve, What: "coverage", Value: ratio, Counts: counts})
}

func (f *figures) revert(d time.Duration) {
	if f.m != nil {
		f.m.ObserveRevert(d)
	}
	f.send = append(f.send, wire.Request{Op: wire.OpObserve, What: "revert", Value: d.Seconds()})
}

func (f *figures) network(outcome string, n int) {
	if n == 0 {
		return
	}
	if f.m != nil {
		f.m.AddNetwork(outcome, uint64(n))
	}
	f.send = append(f.send, wire.Request{Op: wire.OpObserve, What: "network", Counts: map[string]int64{outcome: int64(n)}})
}

// publish writes the textfile and tells a running dald, best effort for
// the daemon (it may not run), strictly for the file (it was asked for).
// dald takes figures only from the connection that opened the session they
// belong to, so they go through a figures session of their own.
func (f *figures) publish() error {
	if len(f.send) > 0 {
		sock := f.socket
		if sock == "" {
			sock = wire.DefaultSocket()
		}
		if cl, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec}); err == nil {
			if open, err := cl.Call(wire.Request{Op: wire.OpSessionOpen, Figures: true}); err == nil {
				for _, r := range f.send {
					r.Session = open.Session
					cl.Call(r)
				}
				cl.Call(wire.Request{Op: wire.OpSessionClose, Session: open.Session})
			}
			cl.Close()
		}
	}
	if f.m != nil {
		return f.m.WriteTextfile(f.path)
	}
	return nil
}
