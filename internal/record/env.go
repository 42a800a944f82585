package record

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/dal-runtime/dal/internal/format/runenv"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/version"
)

// env.json's format is package runenv's; these names are its.
type (
	RunEnv = runenv.Env
	Host   = runenv.Host
)

// EnvVersion is the env.json format version.
const EnvVersion = runenv.Version

// deniedWrites is env.json's form of the sandbox's report.
func deniedWrites(ds []sandbox.DeniedWrite) []runenv.DeniedWrite {
	if ds == nil {
		return nil
	}
	out := make([]runenv.DeniedWrite, len(ds))
	for i, d := range ds {
		out[i] = runenv.DeniedWrite(d)
	}
	return out
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
