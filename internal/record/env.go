package record

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/version"
)

// EnvVersion is the env.json format version.
const EnvVersion = 1

// RunEnv is env.json: everything needed to re-run the command the same way,
// and what the run was like. Variables passed with --keep-env are stored by
// value when they are plain settings and by name only when they are
// secrets (secrets.go), so a bundle replays by itself and a token kept for
// the agent never reaches disk.
type RunEnv struct {
	Version   int       `json:"version"`
	Command   []string  `json:"command"`
	Cwd       string    `json:"cwd"` // relative to the workspace, "." at its root
	Workspace string    `json:"workspace"`
	Mode      string    `json:"mode"`
	Seed      uint64    `json:"seed"`
	Epoch     time.Time `json:"epoch"`
	QuantumNS int64     `json:"quantum_ns"`
	CPUs      []int     `json:"cpus"`
	Timeout   string    `json:"timeout,omitempty"`

	// GuardRails are the variables dal set, by name; Inherited the
	// allowlisted ones passed through; KeptValues the --keep-env plain
	// settings with their values; Secrets the --keep-env names that are
	// credentials (never their values). Kept is what bundles of earlier
	// releases hold instead: every kept name with the SHA-256 of its value.
	GuardRails map[string]string `json:"guard_rails"`
	Inherited  map[string]string `json:"inherited"`
	Kept       map[string]string `json:"kept,omitempty"`
	KeptValues map[string]string `json:"kept_values,omitempty"`
	Secrets    []string          `json:"secrets,omitempty"`
	// Scrubbed are the bundle files (slash paths) in which a secret's
	// value was replaced by [REDACTED].
	Scrubbed []string `json:"scrubbed,omitempty"`

	Host       Host              `json:"host"`
	Runtimes   map[string]string `json:"runtimes"`
	DalVersion string            `json:"dal_version"`

	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	ExitCode   int       `json:"exit_code"`
	TimedOut   bool      `json:"timed_out,omitempty"`

	SelfContained bool `json:"self_contained"`
	Applied       bool `json:"applied"`
	// DeniedWrites are the agent's attempts to write outside the
	// workspace, which failed inside the sandbox.
	DeniedWrites []sandbox.DeniedWrite `json:"denied_writes"`
	// Uncaptured are the fifos, sockets and device nodes the agent made
	// in the workspace, which a bundle does not hold.
	Uncaptured []sandbox.Uncaptured `json:"uncaptured,omitempty"`
	// Network is the capture's setup; nil when the run's network was
	// passthrough (default mode).
	Network *NetworkEnv `json:"network,omitempty"`
}

// Host describes the machine a run was recorded on.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
}

// volatile guard rails name per-run paths and ids; they are recorded but
// not compared.
var volatile = map[string]bool{"DAL_SOCKET": true, "DAL_SESSION": true, "AGENT_CLOCK_FILE": true, "PYTHONPATH": true, "NODE_OPTIONS": true}

func hostInfo() Host {
	h := Host{Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// runtimeVersions asks the interpreter a command starts for its version,
// when it is one dal shims.
func runtimeVersions(argv0 string) map[string]string {
	out := map[string]string{}
	base := filepath.Base(argv0)
	switch {
	case strings.HasPrefix(base, "python"), base == "node":
	default:
		return out
	}
	if b, err := exec.Command(argv0, "--version").CombinedOutput(); err == nil {
		out[base] = strings.TrimSpace(string(b))
	}
	return out
}

// newRunEnv fills env.json from a finished run.
func newRunEnv(spec *runner.Spec, res *runner.Result, workspace, cwd string, started time.Time, secretEnv []string) *RunEnv {
	e := &RunEnv{Version: EnvVersion, Command: spec.Args, Cwd: cwd, Workspace: workspace,
		Mode: spec.Mode, Seed: spec.Seed, Epoch: spec.Epoch.UTC(), QuantumNS: int64(spec.Quantum), CPUs: spec.CPUs,
		GuardRails: map[string]string{}, Inherited: map[string]string{},
		Host: hostInfo(), Runtimes: runtimeVersions(spec.Args[0]), DalVersion: version.Version,
		StartedAt: started.UTC(), DurationMS: res.Wall.Milliseconds(), ExitCode: res.ExitCode, TimedOut: res.TimedOut}
	if spec.Timeout > 0 {
		e.Timeout = spec.Timeout.String()
	}
	rails := map[string]bool{}
	for _, k := range res.Rails {
		rails[k] = true
		e.GuardRails[k] = res.Env[k]
	}
	kept := map[string]string{}
	for k := range res.Env {
		if rails[k] {
			continue
		}
		if runner.Allowlisted(k) {
			e.Inherited[k] = res.Env[k]
		} else {
			kept[k] = res.Env[k]
		}
	}
	e.KeptValues, e.Secrets, _ = splitKept(kept, secretEnv)
	return e
}

// secretValues are the values of the run's secrets, to scrub.
func secretValues(res *runner.Result, secrets []string) []string {
	var out []string
	for _, k := range secrets {
		out = append(out, res.Env[k])
	}
	return out
}
