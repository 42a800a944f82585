package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/sysvirt"
)

// Config describes one sandbox.
type Config struct {
	// Workspace is the absolute path of an existing directory; the agent
	// sees the overlay there.
	Workspace string
	// Staging is a directory dal owns, for upper/, work/ and denied.jsonl.
	// It must be on a filesystem that can hold an overlay upper layer and
	// must not overlap Workspace. Created when missing.
	Staging string
	// Binds are absolute paths (directories or files) shown read-only at
	// the same place, e.g. the shim directory or dal-exec itself when they
	// live under the hidden /tmp. A socket belongs in Sockets, alone,
	// not its directory here.
	Binds []string
	// WritableBinds are absolute paths bound read-write at the same
	// place: what the agent writes there reaches the host, uncaptured.
	// Nothing dal runs needs one today.
	WritableBinds []string
	// Sockets are absolute paths of Unix sockets, e.g. dald's, each shown
	// at the same place as the socket file alone (never its directory),
	// read-only as a mount, which connecting does not need. Under the
	// private /tmp an empty file is made to mount it on. Each must exist
	// when [Command] is called.
	Sockets []string
	// PrivateTmp mounts a fresh tmpfs on /tmp and /dev/shm.
	PrivateTmp bool
	// Lower, when set, are the overlay's lower layers, top first, instead
	// of Workspace itself (which stays the mount point). Replay uses it to
	// stack a layer from [Restore] over the workspace, or to mount a
	// self-contained copy at the recorded path.
	Lower []string
	// Quiet are path prefixes whose denied writes are not listed: e.g.
	// the shim directory, where Python tries to cache bytecode.
	Quiet []string
	// Mounts are further binds at a target of their own, e.g. a file dal
	// wrote in Staging shown at a fixed path in the private /tmp.
	Mounts []Mount
	// Network gives the agent a network namespace of its own with only a
	// loopback interface: nothing it opens reaches another machine unless
	// dal listens for it there ([ListenIn]). Connections it attempts to
	// other addresses fail and are listed by [Blocked].
	Network bool
	// BeforeAgent, when set, runs once the sandbox is set up and before the
	// agent is started, with the init's PID (in dal-exec's PID namespace):
	// the moment to open listeners in its network namespace or start
	// tracing it. An error stops the sandbox; [Ready] returns it.
	BeforeAgent func(initPID int) error
	// Virtual, when enabled, puts every process of the agent's tree under
	// the syscall layer (package sysvirt): virtual clocks, sleeps and
	// timed waits, seeded getrandom and AT_RANDOM. [Virtualized] reads
	// what it served.
	Virtual sysvirt.Config
	// Policy, when set, holds the agent's execs and loopback connects for
	// the policy gate (policygate.go); nil costs nothing.
	Policy *PolicyGate
}

// Mount is a bind of Source at Target inside the sandbox.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// Upper is the capture layer: what the agent wrote, after the run.
func Upper(cfg Config) string { return filepath.Join(cfg.Staging, "upper") }

func workDir(cfg Config) string    { return filepath.Join(cfg.Staging, "work") }
func deniedFile(cfg Config) string { return filepath.Join(cfg.Staging, "denied.jsonl") }
func countsFile(cfg Config) string { return filepath.Join(cfg.Staging, "sysvirt.json") }

// Virtualized returns what the syscall layer served in the finished
// sandbox of cfg; ok is false when it was not enabled or left nothing (the
// init was killed).
func Virtualized(cfg Config) (c sysvirt.Counts, ok bool, err error) {
	if !cfg.Virtual.Enabled() {
		return c, false, nil
	}
	b, err := os.ReadFile(countsFile(cfg))
	if err != nil || len(b) == 0 {
		return c, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, false, fmt.Errorf("read the syscall layer's counts: %w", err)
	}
	return c, true, nil
}

// lowers returns the lower layers, top first.
func (cfg Config) lowers() []string {
	if len(cfg.Lower) > 0 {
		return cfg.Lower
	}
	return []string{cfg.Workspace}
}

// initArg is the hidden argv[0] of the re-executed init.
const initArg = "dal-sandbox-init"

// hostname is the agent's host name, in its own UTS namespace: the same
// on every machine, so a replay sees what the record saw.
const hostname = "dal"

// setupExit is the init's exit status when the sandbox could not be set up.
const setupExit = 125

// spec is what the init is told, as JSON in argv[1]. The agent's
// environment is the init's own.
type spec struct {
	Workspace     string         `json:"workspace"`
	Lower         []string       `json:"lower"`
	Upper         string         `json:"upper"`
	Work          string         `json:"work"`
	Binds         []string       `json:"binds"`
	WritableBinds []string       `json:"writable_binds"`
	Sockets       []string       `json:"sockets"`
	PrivateTmp    bool           `json:"private_tmp"`
	Argv          []string       `json:"argv"`
	Dir           string         `json:"dir"`
	Quiet         []string       `json:"quiet"`
	Mounts        []Mount        `json:"mounts"`
	Network       bool           `json:"network"`
	Gate          bool           `json:"gate"`
	Virtual       sysvirt.Config `json:"virtual"`
	Rootless      bool           `json:"rootless"`
	Policy        bool           `json:"policy,omitempty"`        // a PolicyGate: its channel is at policyFD
	PolicyExempt  []string       `json:"policy_exempt,omitempty"` // PolicyGate.Exempt
}

// SetupError is a failure to build the sandbox: the agent never ran. Its
// message is one sentence for the user.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// pending holds the parent's ends of a started sandbox's status pipe.
type pending struct {
	status *os.File // read end: a setup error, or EOF once the agent runs
	gate   *os.File // the parent's end of the gate socket (gate.go)
	gateMu sync.Mutex
	work   string // the overlay's work directory (Staging/work)
	before func(int) error
	child  []*os.File
	once   sync.Once
	err    error
}

var started sync.Map // *exec.Cmd → *pending

// Command returns an *exec.Cmd that runs argv with env in dir (absolute;
// "" = the caller's working directory) inside the sandbox described by cfg.
// The caller sets Stdin, Stdout and Stderr and may set fields of
// SysProcAttr (Setpgid, Foreground...) but must keep Cloneflags and
// Pdeathsig. After Start, [Ready] reports whether the sandbox came up;
// [Wait] (in place of cmd.Wait) does the same after the run. The command
// exits with the agent's status, 128+n when the agent was killed by signal
// n, and 125 on a setup failure. Command creates Staging/upper and
// Staging/work; it leaks two file descriptors until Ready or Wait is called.
func Command(cfg Config, argv []string, env []string, dir string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command to run in the sandbox")
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if rootless() {
		if err := userNamespaces("/proc/sys"); err != nil {
			return nil, err
		}
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("read the working directory: %w", err)
		}
		dir = wd
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("the agent's working directory %q is not absolute", dir)
	}
	for _, d := range []string{Upper(cfg), workDir(cfg)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create the sandbox staging directory: %w", err)
		}
	}
	sp := spec{Workspace: filepath.Clean(cfg.Workspace), Lower: cfg.lowers(), Upper: Upper(cfg), Work: workDir(cfg),
		Binds: cfg.Binds, WritableBinds: cfg.WritableBinds, Sockets: cfg.Sockets, PrivateTmp: cfg.PrivateTmp, Argv: argv, Dir: filepath.Clean(dir), Quiet: cfg.Quiet,
		Mounts: cfg.Mounts, Network: cfg.Network, Gate: cfg.BeforeAgent != nil, Virtual: cfg.Virtual, Rootless: rootless()}
	if cfg.Policy != nil {
		sp.Policy, sp.PolicyExempt = true, cfg.Policy.Exempt
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	denied, err := os.OpenFile(deniedFile(cfg), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the denied-writes list: %w", err)
	}
	counts, err := os.OpenFile(countsFile(cfg), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		denied.Close()
		return nil, fmt.Errorf("create the syscall layer's counts: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		denied.Close()
		counts.Close()
		return nil, fmt.Errorf("create the sandbox status pipe: %w", err)
	}
	gr, gw, err := gateSocket()
	if err != nil {
		denied.Close()
		counts.Close()
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("create the sandbox gate pipe: %w", err)
	}
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if cfg.Network {
		flags |= syscall.CLONE_NEWNET
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{initArg, string(b)},
		Env:        env,
		ExtraFiles: []*os.File{pw, denied, gr, counts}, // fd 3, 4, 5, 6
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: flags,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if rootless() {
		a := cmd.SysProcAttr
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	p := &pending{status: pr, gate: gw, work: workDir(cfg), before: cfg.BeforeAgent, child: []*os.File{pw, denied, gr, counts}}
	if cfg.Policy != nil {
		parent, child, err := newPolicyChannel()
		if err != nil {
			for _, f := range append(p.child, pr, gw) {
				f.Close()
			}
			return nil, err
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, child) // fd 7
		p.child = append(p.child, child)
		go servePolicy(parent, cfg.Policy)
	}
	started.Store(cmd, p)
	return cmd, nil
}

// check validates cfg in the caller, so the common mistakes are reported
// before anything starts.
func (cfg Config) check() error {
	ws := cfg.Workspace
	if ws == "" || !filepath.IsAbs(ws) {
		return fmt.Errorf("the workspace %q is not an absolute path: pass an absolute directory", ws)
	}
	if filepath.Clean(ws) == "/" {
		return errors.New("the workspace cannot be /: choose a project directory")
	}
	if fi, err := os.Stat(ws); err != nil {
		return fmt.Errorf("the workspace %s does not exist: create it or choose another directory", ws)
	} else if !fi.IsDir() {
		return fmt.Errorf("the workspace %s is not a directory: choose a directory", ws)
	}
	for _, l := range cfg.Lower {
		if fi, err := os.Stat(l); err != nil || !fi.IsDir() || !filepath.IsAbs(l) {
			return fmt.Errorf("the lower layer %s is not an existing absolute directory", l)
		}
	}
	if cfg.Staging == "" || !filepath.IsAbs(cfg.Staging) {
		return fmt.Errorf("the sandbox staging directory %q is not an absolute path", cfg.Staging)
	}
	for _, l := range append([]string{ws}, cfg.Lower...) {
		if within(cfg.Staging, l) || within(l, cfg.Staging) {
			return fmt.Errorf("the sandbox staging directory %s overlaps the workspace %s: put it elsewhere", cfg.Staging, l)
		}
	}
	for _, b := range append(append([]string(nil), cfg.Binds...), cfg.WritableBinds...) {
		if !filepath.IsAbs(b) {
			return fmt.Errorf("the bind path %q is not absolute", b)
		}
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("the bind path %s does not exist: create it first", b)
		}
	}
	for _, p := range cfg.Sockets {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("the socket path %q is not absolute", p)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("the socket %s does not exist: start the service first", p)
		}
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s is not a Unix socket: pass the socket's own path", p)
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// Ready blocks until the sandbox of a started cmd (from [Command]) has
// started the agent, and returns a *[SetupError] when it could not; then
// the init has exited and cmd.Wait reaps it. It closes the parent's copies
// of the init's descriptors, so it never hangs on a dead init. Calling it
// more than once returns the same answer.
func Ready(cmd *exec.Cmd) error {
	v, ok := started.Load(cmd)
	if !ok {
		return errors.New("sandbox.Ready: not a command from sandbox.Command")
	}
	p := v.(*pending)
	p.once.Do(func() {
		if cmd.Process == nil {
			p.err = errors.New("sandbox.Ready: the command was not started")
			return
		}
		for _, f := range p.child {
			f.Close()
		}
		defer p.gate.Close()
		if p.before != nil {
			if err := p.openGate(cmd.Process.Pid); err != nil {
				cmd.Process.Kill()
				p.status.Close()
				p.err = err
				return
			}
		}
		msg, err := io.ReadAll(bufio.NewReader(io.LimitReader(p.status, 4096)))
		p.status.Close()
		switch {
		case len(msg) > 0:
			p.err = &SetupError{Msg: strings.TrimSpace(string(msg))}
		case err != nil:
			p.err = fmt.Errorf("read the sandbox status: %w", err)
		}
	})
	return p.err
}

// openGate waits for the init's "set up" byte, runs the BeforeAgent hook
// and lets the init start the agent. A setup error instead of the byte is
// returned as a *SetupError.
func (p *pending) openGate(pid int) error {
	var b [1]byte
	n, _ := p.status.Read(b[:])
	if n != 1 || b[0] != gateByte {
		rest, _ := io.ReadAll(io.LimitReader(p.status, 4096))
		msg := strings.TrimSpace(string(append(b[:n], rest...)))
		if msg == "" {
			msg = "the sandbox init exited before setting up"
		}
		return &SetupError{Msg: msg}
	}
	gates.Store(pid, p)
	err := p.before(pid)
	gates.Delete(pid)
	if err != nil {
		return gateError{err}
	}
	if _, err := p.gate.Write(b[:]); err != nil {
		return fmt.Errorf("start the agent in the sandbox: %w", err)
	}
	return nil
}

// errGate marks an error of the BeforeAgent hook: the agent never ran.
var errGate = errors.New("the agent was not started")

type gateError struct{ err error }

func (e gateError) Error() string   { return e.err.Error() }
func (e gateError) Unwrap() []error { return []error{e.err, errGate} }

// gateByte is what a gated init writes on the status pipe once set up.
const gateByte = 0x01

// Wait is cmd.Wait for a command from [Command]: it returns a *[SetupError]
// when the sandbox could not be set up, else what cmd.Wait returns (an
// *exec.ExitError carries the agent's status). It forgets cmd.
func Wait(cmd *exec.Cmd) error {
	rerr := Ready(cmd)
	werr := cmd.Wait()
	if v, ok := started.Load(cmd); ok && rootless() {
		// The overlay left work/work at mode 0, owned by the caller:
		// make it removable (see rootless).
		if d, err := safefs.Open(v.(*pending).work); err == nil {
			d.Chmod("work", 0o700)
			d.Close()
		}
	}
	started.Delete(cmd)
	var se *SetupError
	if errors.As(rerr, &se) || errors.Is(rerr, errGate) {
		return rerr
	}
	if werr == nil {
		return rerr
	}
	return werr
}

// DeniedWrite is one write the agent attempted outside the writable parts
// of its sandbox, or a call refused whatever its target: io_uring_setup
// (an io_uring would write past the watcher), with an empty Path.
type DeniedWrite struct {
	Op   string `json:"op"`   // the system call: openat, mkdir, unlinkat, io_uring_setup...
	Path string `json:"path"` // absolute, as resolved in the sandbox; "" for io_uring_setup
}

// BlockedConnect is a connection the agent attempted, from a sandbox with
// its own network namespace, on an IPv4 or IPv6 socket to an address off
// the machine's loopback. It failed (the namespace has no route out);
// nothing was sent. Unix-socket connects are never listed: they reach
// what the sandbox shows.
type BlockedConnect struct {
	Op   string `json:"op"`   // "connect"
	Addr string `json:"addr"` // "ip:port"
}

// Blocked lists the connections the agent attempted to other machines, in
// the order first seen (once per address).
func Blocked(cfg Config) ([]BlockedConnect, error) {
	var out []BlockedConnect
	err := readList(cfg, func(line []byte) {
		var b BlockedConnect
		if json.Unmarshal(line, &b) == nil && b.Addr != "" {
			out = append(out, b)
		}
	})
	return out, err
}

// readList calls fn with each line of the watcher's list.
func readList(cfg Config, fn func([]byte)) error {
	f, err := os.Open(deniedFile(cfg))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the sandbox's list of denied calls: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	return sc.Err()
}

// Denied lists the writes the agent attempted on read-only locations during
// the run, in the order first seen. See the package documentation for what
// is watched.
func Denied(cfg Config) ([]DeniedWrite, error) {
	var out []DeniedWrite
	err := readList(cfg, func(line []byte) {
		var d struct {
			DeniedWrite
			Addr string `json:"addr"` // a BlockedConnect
		}
		if json.Unmarshal(line, &d) == nil && d.Addr == "" && d.Op != "" {
			out = append(out, d.DeniedWrite)
		}
	})
	return out, err
}
