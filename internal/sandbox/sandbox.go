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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/internal/safefs"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
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
	// SocketsAt are Unix sockets each shown at a target of its own
	// (Source at Target), as Sockets are otherwise: record shows dald's at
	// /run/dal/dald.sock, the same path in every run.
	SocketsAt []Mount
	// PrivateTmp mounts a fresh tmpfs on /tmp, /var/tmp, /run, /var/run
	// and /dev/shm. With Direct, /tmp alone is private, an overlay over
	// the host's that keeps the agent's writes; [Config.HideHome] shows
	// the working directory there read-write, and unsets PrivateTmp when
	// the working directory or a bind holds /tmp.
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
	// dal listens for it there ([Cmd.ListenIn]). Connections it attempts to
	// other addresses fail and are listed by [Blocked].
	Network bool
	// BeforeAgent, when set, runs in [Cmd.Ready] once the sandbox is set
	// up and before the agent is started, with the sandbox's command
	// (c.Process.Pid is the init's PID in dal-exec's PID namespace): the
	// moment to open listeners in its network namespace ([Cmd.ListenIn],
	// [Cmd.SocketIn]) or start tracing it. An error stops the sandbox;
	// Ready returns it.
	BeforeAgent func(c *Cmd) error
	// Virtual, when enabled, puts every process of the agent's tree under
	// the syscall layer (package sysvirt): virtual clocks, sleeps and
	// timed waits, seeded getrandom and AT_RANDOM. [Virtualized] reads
	// what it served.
	Virtual sysvirt.Config
	// Policy, when set, holds the agent's execs and loopback connects for
	// the policy gate (policygate.go); nil costs nothing.
	Policy *PolicyGate
	// Direct runs the agent on the host's own file system, as `dal-exec
	// run` does (direct.go): no overlay and nothing made read-only but
	// what Binds names (Workspace, Lower, Sockets, Quiet and Network are
	// not used), the host's /dev with the seeded FIFOs over
	// /dev/urandom and /dev/random. It keeps what makes a run repeatable:
	// pid, mount, UTS and IPC namespaces of its own, a /proc for them and
	// the syscall layer, and hides what [Config.HideHome] says.
	Direct bool
	// RunDir, with Direct, is an existing directory of the host covered
	// for the run with a fresh tmpfs, so that dal's own files show at
	// the same paths in every run: Mounts and SocketsAt target paths
	// below it. It must not be a symbolic link, nor be under one.
	RunDir string
	// Hidden are directories covered by an empty, read-only tmpfs (the
	// caller's home, /root): only Binds and WritableBinds below them show
	// through. Set by [Config.HideHome] (home.go), in a direct sandbox too.
	Hidden []string
	// Secrets are paths covered by an empty read-only directory or file
	// after everything else is mounted: never shown, even below a bind.
	Secrets []string
	// Limits are the agent's tree's resource limits (limits.go).
	Limits Limits
	// CPUs, when set, are the CPUs the agent's tree runs on (its affinity,
	// inherited by what it starts). The init's own threads, the syscall
	// layer's supervisor, keep the affinity the Cmd was started with.
	CPUs []int
	// Settle, with BeforeAgent and the syscall layer, keeps the gate open
	// while the agent runs so that [Cmd.Settle] can ask whether the
	// agent's tree has settled: dal's proxy hands it a response only then.
	Settle bool
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

// spec is what the init is told, as JSON in argv[1] or, from [Prestart],
// on the gate. The agent's environment is Env, or without it the init's
// own.
type spec struct {
	Workspace     string         `json:"workspace"`
	Lower         []string       `json:"lower"`
	Upper         string         `json:"upper"`
	Work          string         `json:"work"`
	Binds         []string       `json:"binds"`
	WritableBinds []string       `json:"writable_binds"`
	Sockets       []string       `json:"sockets"`
	SocketsAt     []Mount        `json:"sockets_at"`
	PrivateTmp    bool           `json:"private_tmp"`
	HostPID       int            `json:"host_pid"` // dal-exec: its /proc/PID/net/unix lists the host's sockets
	Argv          []string       `json:"argv"`
	Env           []string       `json:"env,omitempty"`
	Dir           string         `json:"dir"`
	Quiet         []string       `json:"quiet"`
	Mounts        []Mount        `json:"mounts"`
	Network       bool           `json:"network"`
	Gate          bool           `json:"gate"`
	Virtual       sysvirt.Config `json:"virtual"`
	Rootless      bool           `json:"rootless"`
	Policy        bool           `json:"policy,omitempty"`        // a PolicyGate: its channel is at policyFD
	PolicyExempt  []string       `json:"policy_exempt,omitempty"` // PolicyGate.Exempt
	Direct        bool           `json:"direct,omitempty"`
	RunDir        string         `json:"run_dir,omitempty"`
	CPUs          []int          `json:"cpus,omitempty"`
	Settle        bool           `json:"settle,omitempty"`
	Hidden        []string       `json:"hidden,omitempty"`
	Secrets       []string       `json:"secrets,omitempty"`
	Limits        Limits         `json:"limits"`
}

// sameFixed reports whether sp and early, an init's first spec from
// [Prestart], agree on what the init set up before the second.
func (sp *spec) sameFixed(early *spec) bool {
	a, b := sp.Virtual, early.Virtual
	a.StartNS, b.StartNS = 0, 0
	return a == b && sp.Direct == early.Direct && sp.Rootless == early.Rootless
}

// SetupError is a failure to build the sandbox: the agent never ran. Its
// message is one sentence for the user.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// Cmd is a command that runs in a sandbox, from [Command]. The embedded
// *exec.Cmd is the sandbox's init; the caller sets its standard streams
// and starts it. Cmd owns the parent's ends of the init's status pipe,
// gate (gate.go) and policy channel (policygate.go), and its copies of the
// descriptors the init inherits (fds 3 to 7): [Cmd.Ready] closes the
// inherited copies and the gate once the init runs, [Cmd.Wait] and
// [Cmd.Close] close every one.
type Cmd struct {
	*exec.Cmd

	status *os.File   // read end of the status pipe: a setup error, or EOF once the agent runs
	child  []*os.File // the init's descriptors (ExtraFiles), the parent's copies
	gate   *os.File   // dal-exec's end of the gate socket
	policy *os.File   // dal-exec's end of the policy channel; nil without Config.Policy
	// policyRead is closed when servePolicy has read the policy channel
	// to its end (or the channel was closed).
	policyRead chan struct{}
	work       string   // the overlay's work directory (Staging/work)
	exit       *os.File // read end of the exit pipe (exitReport)
	before     func(*Cmd) error
	prestarted bool   // from Prestart: the spec goes on the gate (Begin)
	early      Config // what Prestart was given
	configured bool   // Configure sent the configuration
	begun      bool   // Begin sent it

	gateMu   sync.Mutex // held for each request on the gate
	gateOpen bool       // BeforeAgent is running: SocketIn may ask
	// settle is the gate kept for Settle while the agent runs (Config.Settle).
	settle settler

	ready     sync.Once
	readyErr  error
	closeOnce sync.Once
	closeErr  error

	reportOnce sync.Once // report: the exit report, read after Wait
	rep        exitReport
	repOK      bool
}

// Command returns a [Cmd] that runs argv with env in dir (absolute; "" =
// the caller's working directory) inside the sandbox described by cfg.
// The caller sets Stdin, Stdout and Stderr and may set fields of
// SysProcAttr (Setpgid, Foreground...) but must keep Cloneflags and
// Pdeathsig. After Start, [Cmd.Ready] reports whether the sandbox came
// up; [Cmd.Wait] (in place of exec.Cmd.Wait) does the same after the run.
// The command exits with the agent's status, 128+n when the agent was
// killed by signal n, and 125 on a setup failure. Command creates
// Staging/upper and Staging/work, and opens descriptors that the Cmd owns
// until Wait or [Cmd.Close]: call one of them, whether or not the command
// was started.
func Command(cfg Config, argv []string, env []string, dir string) (*Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command to run in the sandbox")
	}
	if cfg.Virtual.StartNS == 0 {
		// Before the sandbox makes anything: what it makes is the run's.
		cfg.Virtual.StartNS = sysvirt.StartNow()
	}
	c, err := prepare(cfg, false)
	if err != nil {
		return nil, err
	}
	b, err := specFor(cfg, argv, nil, dir)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Args[1], c.Env = string(b), env
	return c, nil
}

// specFollows is the init's argv[1] when [Prestart] started it: the spec
// comes on the gate.
const specFollows = "-"

// Prestart returns a [Cmd] for a sandbox described by cfg whose agent is
// not known yet: the caller sets its standard streams and SysProcAttr as
// for [Command] and starts it at once, and the init sets up what it can
// (its image, the supervisor's threads) while the caller prepares the
// agent; [Cmd.Begin] then says what to run. Cmd's other methods work as
// for [Command]. Prestart is for a direct sandbox under the syscall layer.
//
// A direct sandbox's init may even start before its staging directory is
// made: with cfg.Staging empty, the init waits for [Cmd.Configure] to name
// it (dal-exec starts it first thing, and makes its private directory
// meanwhile).
func Prestart(cfg Config) (*Cmd, error) {
	if !cfg.Virtual.Enabled() {
		return nil, errors.New("sandbox.Prestart: a sandbox without the syscall layer gains nothing from an early start: use Command")
	}
	c, err := prepare(cfg, true)
	if err != nil {
		return nil, err
	}
	// The init's own environment is GOMAXPROCS alone (the agent's comes
	// with the spec): nothing of the caller's reaches the init's runtime,
	// which runs with a processor for each of the agent's CPUs, as an
	// init started with the agent's environment does (the runner's
	// GOMAXPROCS), or dal-exec's own count, which the init's runtime
	// would find again reading its cgroup's limits (about 0.1 ms of its
	// start). Not one for each thread it warms: a runtime started with
	// 16 spends 3 ms more of CPU on a run of date.
	procs := runtime.GOMAXPROCS(0)
	if len(cfg.CPUs) > 0 {
		procs = len(cfg.CPUs)
	}
	c.Args[1], c.Env, c.prestarted, c.early = specFollows, []string{"GOMAXPROCS=" + strconv.Itoa(procs)}, true, cfg
	if cfg.Staging != "" {
		if err := c.Configure(cfg); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// sameStart reports whether a sandbox started by Prestart for a is one for
// b: what Prestart and its init's start depend on is the same.
func sameStart(a, b Config) bool {
	return a.Direct == b.Direct && a.Network == b.Network && slices.Equal(a.CPUs, b.CPUs) &&
		a.Virtual.Enabled() == b.Virtual.Enabled() && a.Policy == nil && b.Policy == nil &&
		a.BeforeAgent == nil && b.BeforeAgent == nil
}

// Configure makes the staging directory (cfg.Staging) of a c from
// [Prestart] (started or not) and tells its init the sandbox's
// configuration, cfg: the init sets up what depends on it alone (a direct
// sandbox's fixed mounts) and waits for [Cmd.Begin]. cfg may differ from
// the one Prestart was given in what the init is told only (the syscall
// layer's seed, clock and quantum), not in how it was started (see
// sameStart). Prestart calls it when its cfg names the staging directory.
func (c *Cmd) Configure(cfg Config) error {
	if !c.prestarted || c.configured {
		return errors.New("sandbox.Cmd.Configure: the command is not one from Prestart, or was configured already")
	}
	if !sameStart(c.early, cfg) {
		return errors.New("sandbox.Cmd.Configure: the sandbox was started for another kind of configuration (kind of sandbox, CPUs, syscall layer on or off, policy, network)")
	}
	if err := cfg.check(); err != nil {
		return err
	}
	c.early = cfg
	c.configured = true
	denied, counts, err := c.stagingFiles(cfg)
	if err != nil {
		return err
	}
	// What it can set up before the agent is known, waiting on the gate
	// for it to start: the configuration, without an agent, after the
	// files it writes in the staging directory.
	b, err := specFor(cfg, nil, []string{}, "/")
	if err == nil {
		err = sendFiles(c.gate, denied, counts)
	}
	if err == nil {
		err = sendSpec(c.gate, b)
	}
	if err != nil {
		return fmt.Errorf("prepare the sandbox's start: %w", err)
	}
	return nil
}

// Begin tells the init of a started c from [Prestart] to run argv with env
// in dir (as [Command]'s) in the sandbox cfg describes: cfg is the one
// Prestart was given, to which the caller may since have added Mounts,
// SocketsAt and RunDir. The run's virtual time starts here unless
// cfg.Virtual.StartNS says otherwise. Then [Cmd.Ready] and [Cmd.Wait]
// work as after Start.
func (c *Cmd) Begin(cfg Config, argv, env []string, dir string) error {
	if !c.prestarted || c.Process == nil {
		return errors.New("sandbox.Cmd.Begin: the command is not a started one from Prestart")
	}
	if c.begun {
		return errors.New("sandbox.Cmd.Begin: called twice")
	}
	if !c.configured {
		return errors.New("sandbox.Cmd.Begin: the sandbox's staging directory was never named (Cmd.Configure)")
	}
	if len(argv) == 0 {
		return errors.New("no command to run in the sandbox")
	}
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Virtual.StartNS == 0 {
		cfg.Virtual.StartNS = sysvirt.StartNow()
	}
	if env == nil {
		env = []string{}
	}
	b, err := specFor(cfg, argv, env, dir)
	if err != nil {
		return err
	}
	c.begun = true
	// The init has its own copies: with ours closed, a gone init's end of
	// the gate is closed too.
	closeAll(c.child)
	// A closed gate is not the only sign of a gone init: a process the
	// caller forks meanwhile holds copies of the caller's descriptors
	// until it execs, the init's end of the gate among them, and the
	// spec would then be written for no one.
	err = errInitGone
	if !exited(c.Process.Pid) {
		err = sendSpec(c.gate, b)
	}
	if err != nil {
		// The init is gone: what it said before is the reason.
		if msg, _ := io.ReadAll(io.LimitReader(c.status, 4096)); len(msg) > 0 && msg[0] != gateByte {
			return &SetupError{Msg: strings.TrimSpace(string(msg))}
		}
		return fmt.Errorf("start the agent in the sandbox: the sandbox's init is gone (%w)", err)
	}
	return nil
}

var errInitGone = errors.New("it exited")

// exited reports whether the child pid has exited (it is not reaped).
func exited(pid int) bool {
	var si unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && si.Signo == int32(unix.SIGCHLD)
}

// specFor is the init's spec, as JSON, for argv run in dir ("" = the
// caller's working directory) in the sandbox cfg describes; env is the
// agent's environment when it is not the init's own (nil).
func specFor(cfg Config, argv, env []string, dir string) ([]byte, error) {
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
	sp := spec{Workspace: filepath.Clean(cfg.Workspace), Lower: cfg.lowers(), Upper: Upper(cfg), Work: workDir(cfg),
		Binds: cfg.Binds, WritableBinds: cfg.WritableBinds, Sockets: cfg.Sockets, SocketsAt: cfg.SocketsAt, PrivateTmp: cfg.PrivateTmp, HostPID: os.Getpid(), Argv: argv, Env: env, Dir: filepath.Clean(dir), Quiet: cfg.Quiet,
		Mounts: cfg.Mounts, Network: cfg.Network, Gate: cfg.BeforeAgent != nil, Settle: cfg.Settle && cfg.BeforeAgent != nil && cfg.Virtual.Enabled(), Virtual: cfg.Virtual, Rootless: rootless(),
		Direct: cfg.Direct, RunDir: cfg.RunDir, CPUs: cfg.CPUs, Hidden: cfg.Hidden, Secrets: cfg.Secrets, Limits: cfg.Limits}
	if cfg.Policy != nil {
		sp.Policy, sp.PolicyExempt = true, cfg.Policy.Exempt
	}
	return json.Marshal(sp)
}

// prepare checks cfg and makes what the init of its sandbox is started
// with: the staging directories, the files and pipes it inherits, and the
// command, whose argv[1] (the spec) the caller fills in.
func prepare(cfg Config, early bool) (*Cmd, error) {
	if early {
		// The staging directory comes later ([Cmd.Configure]).
		if !cfg.Direct {
			return nil, errors.New("sandbox.Prestart is for a direct sandbox: use Command")
		}
	} else if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := checkKernel(cfg.Virtual.Enabled()); err != nil {
		return nil, err
	}
	if err := Outside(); err != nil {
		return nil, err
	}
	if rootless() {
		if err := userNamespaces("/proc/sys"); err != nil {
			return nil, err
		}
	}
	c := &Cmd{before: cfg.BeforeAgent}
	c.settle.wanted = cfg.Settle && cfg.BeforeAgent != nil && cfg.Virtual.Enabled()
	if !cfg.Direct {
		c.work = workDir(cfg)
	}
	fail := func(err error) (*Cmd, error) {
		c.Close()
		return nil, err
	}
	var denied, counts *os.File
	if early {
		// Placeholders, which keep the descriptors' numbers until the
		// init gets the files on its gate.
		null, err := os.Open(os.DevNull)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", os.DevNull, err))
		}
		c.child = append(c.child, null)
		denied, counts = null, null
	} else {
		var err error
		if denied, counts, err = c.stagingFiles(cfg); err != nil {
			return fail(err)
		}
	}
	er, exit, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("create the sandbox's exit pipe: %w", err))
	}
	c.exit, c.child = er, append(c.child, exit)
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("create the sandbox status pipe: %w", err))
	}
	c.status, c.child = pr, append(c.child, pw)
	gr, gw, err := gateSocket()
	if err != nil {
		return fail(fmt.Errorf("create the sandbox gate pipe: %w", err))
	}
	c.gate, c.child = gw, append(c.child, gr)
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if cfg.Network && !cfg.Direct {
		flags |= syscall.CLONE_NEWNET
	}
	c.Cmd = &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{initArg, ""},                    // the spec: the caller's
		ExtraFiles: []*os.File{pw, denied, gr, counts, exit}, // fd 3, 4, 5, 6, 7
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: flags,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if rootless() {
		a := c.SysProcAttr
		a.Cloneflags |= syscall.CLONE_NEWUSER
		// The agent is who it would be without dal, not root: the same
		// ids inside, so that a write the caller could not make fails in
		// the sandbox too, and the init keeps the capabilities of its
		// user namespace across its exec as ambient ones (it drops them
		// before the agent starts).
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		for c := 0; c <= lastCap(); c++ {
			a.AmbientCaps = append(a.AmbientCaps, uintptr(c))
		}
	}
	if cfg.Policy != nil {
		parent, child, err := newPolicyChannel()
		if err != nil {
			return fail(err)
		}
		c.ExtraFiles = append(c.ExtraFiles, child) // fd 8
		c.child = append(c.child, child)
		c.policy, c.policyRead = parent, make(chan struct{})
		go servePolicy(parent, cfg.Policy, c.policyRead)
	}
	c.useImage(initImage())
	return c, nil
}

// stagingFiles makes cfg's staging directory and the files the init
// writes there: the denied-writes list and the syscall layer's counts,
// which the Cmd owns (the init gets copies).
func (c *Cmd) stagingFiles(cfg Config) (denied, counts *os.File, err error) {
	dirs := []string{Upper(cfg), workDir(cfg)}
	if cfg.Direct {
		dirs = []string{cfg.Staging}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, fmt.Errorf("create the sandbox staging directory: %w", err)
		}
	}
	denied, err = os.OpenFile(deniedFile(cfg), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("create the denied-writes list: %w", err)
	}
	c.child = append(c.child, denied)
	counts, err = os.OpenFile(countsFile(cfg), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("create the syscall layer's counts: %w", err)
	}
	c.child = append(c.child, counts)
	return denied, counts, nil
}

// check validates cfg in the caller, so the common mistakes are reported
// before anything starts.
func (cfg Config) check() error {
	if cfg.Direct {
		return cfg.checkDirect()
	}
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
	if err := cfg.checkBinds(); err != nil {
		return err
	}
	return checkSockets(cfg.Sockets, cfg.SocketsAt)
}

// checkBinds checks cfg's Binds, WritableBinds and Hidden.
func (cfg Config) checkBinds() error {
	for _, b := range append(append([]string(nil), cfg.Binds...), cfg.WritableBinds...) {
		if !filepath.IsAbs(b) {
			return fmt.Errorf("the bind path %q is not absolute", b)
		}
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("the bind path %s does not exist: create it first", b)
		}
	}
	for _, h := range cfg.Hidden {
		if !filepath.IsAbs(h) || filepath.Clean(h) == "/" {
			return fmt.Errorf("the hidden directory %q is not an absolute path below /", h)
		}
	}
	return nil
}

// checkSockets checks the sockets a sandbox is to show.
func checkSockets(own []string, at []Mount) error {
	sockets := slices.Clone(own)
	for _, m := range at {
		if !filepath.IsAbs(m.Target) {
			return fmt.Errorf("the socket's path in the sandbox %q is not absolute", m.Target)
		}
		sockets = append(sockets, m.Source)
	}
	for _, p := range sockets {
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

// Ready blocks until the sandbox of the started c has started the agent,
// and returns a *[SetupError] when it could not; then the init has exited
// and [Cmd.Wait] reaps it. With [Config.BeforeAgent] it runs the hook
// first, on this goroutine. It closes the parent's copies of the init's
// descriptors and the gate, so it never hangs on a dead init. Calling it
// more than once returns the same answer.
func (c *Cmd) Ready() error {
	c.ready.Do(func() {
		if c.Process == nil {
			c.readyErr = errors.New("sandbox.Cmd.Ready: the command was not started")
			return
		}
		closeAll(c.child)
		defer c.closeGate()
		if c.prestarted && !c.begun {
			// The init waits for its spec: closing the gate ends it.
			c.closeGate()
			c.status.Close()
			c.readyErr = gateError{errors.New("sandbox: the agent was never named (Cmd.Begin was not called)")}
			return
		}
		if c.before != nil {
			if err := c.openGate(); err != nil {
				c.Process.Kill()
				c.status.Close()
				c.readyErr = err
				return
			}
			if c.settle.wanted {
				c.gateMu.Lock()
				c.settle.take(c.gate)
				c.gate = nil
				c.gateMu.Unlock()
			}
		}
		msg, err := io.ReadAll(bufio.NewReader(io.LimitReader(c.status, 4096)))
		c.status.Close()
		switch {
		case len(msg) > 0:
			c.readyErr = &SetupError{Msg: strings.TrimSpace(string(msg))}
		case err != nil:
			c.readyErr = fmt.Errorf("read the sandbox status: %w", err)
		}
	})
	return c.readyErr
}

// openGate waits for the init's "set up" byte, runs the BeforeAgent hook
// and lets the init start the agent. A setup error instead of the byte is
// returned as a *SetupError.
func (c *Cmd) openGate() error {
	var b [1]byte
	n, _ := c.status.Read(b[:])
	if n != 1 || b[0] != gateByte {
		rest, _ := io.ReadAll(io.LimitReader(c.status, 4096))
		msg := strings.TrimSpace(string(append(b[:n], rest...)))
		if msg == "" {
			msg = "the sandbox init exited before setting up"
		}
		return &SetupError{Msg: msg}
	}
	c.setGateOpen(true)
	err := c.before(c)
	c.setGateOpen(false)
	if err != nil {
		return gateError{err}
	}
	if _, err := c.gate.Write(b[:]); err != nil {
		return fmt.Errorf("start the agent in the sandbox: %w", err)
	}
	return nil
}

func (c *Cmd) setGateOpen(open bool) {
	c.gateMu.Lock()
	c.gateOpen = open
	c.gateMu.Unlock()
}

// closeGate closes dal-exec's end of the gate, once no request is on it.
func (c *Cmd) closeGate() {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	c.gateOpen = false
	if c.gate != nil {
		c.gate.Close()
	}
}

// errGate marks an error of the BeforeAgent hook: the agent never ran.
var errGate = errors.New("the agent was not started")

type gateError struct{ err error }

func (e gateError) Error() string   { return e.err.Error() }
func (e gateError) Unwrap() []error { return []error{e.err, errGate} }

// gateByte is what a gated init writes on the status pipe once set up.
const gateByte = 0x01

// Wait is exec.Cmd.Wait for a command from [Command]: it returns a
// *[SetupError] when the sandbox could not be set up, else what
// exec.Cmd.Wait returns (an *exec.ExitError carries the agent's status),
// or, when the init said it had nothing left to do but exit (a direct
// sandbox's agent that left nothing running, without a policy), nil or an
// [*ExitError] with the agent's status, while the init's end (about a
// millisecond: its threads, its namespaces) is reaped in the background
// ([Exiting]). Once the init is reaped or done it lets the policy gate
// read the init's last requests and closes every descriptor c owns
// ([Cmd.Close]).
func (c *Cmd) Wait() error {
	rerr := c.Ready()
	if rerr == nil && c.policyRead == nil && ownStreams(c.Cmd) {
		if r, ok := c.report(); ok && r.Done {
			exiting.add(c.Cmd)
			c.Close()
			if r.Code != 0 {
				return &ExitError{Code: r.Code}
			}
			return nil
		}
	}
	werr := c.Cmd.Wait()
	if c.policyRead != nil {
		// No copy of the init's end is left (the init is gone, and
		// ours are closed here or were by Ready): the gate's reader
		// reaches the end of what the init sent.
		closeAll(c.child)
		<-c.policyRead
	}
	if rootless() && c.Process != nil && c.work != "" {
		// The overlay left work/work at mode 0, owned by the caller:
		// make it removable (see rootless).
		if d, err := safefs.Open(c.work); err == nil {
			d.Chmod("work", 0o700)
			d.Close()
		}
	}
	c.report() // the init is gone: what it wrote, before the pipe closes
	c.Close()
	var se *SetupError
	if errors.As(rerr, &se) || errors.Is(rerr, errGate) {
		return rerr
	}
	if werr == nil {
		return rerr
	}
	return werr
}

// ownStreams reports whether cmd's standard streams are files (or unset):
// exec.Cmd copies no others, whose copying only its Wait ends.
func ownStreams(cmd *exec.Cmd) bool {
	for _, s := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		if _, ok := s.(*os.File); !ok && s != nil {
			return false
		}
	}
	return true
}

// ExitError is the agent's exit status when [Cmd.Wait] returned before the
// init's end: Code is what the init exits with (128+n for an agent killed
// by signal n; [Cmd.Ended] tells them apart).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return "exit status " + strconv.Itoa(e.Code) }

// ExitCode is the agent's exit status.
func (e *ExitError) ExitCode() int { return e.Code }

// exiting are the inits whose end is being reaped in the background.
var exiting = exitingInits{pids: map[int]bool{}}

type exitingInits struct {
	mu   sync.Mutex
	pids map[int]bool
}

// add reaps cmd's process in the background.
func (e *exitingInits) add(cmd *exec.Cmd) {
	pid := cmd.Process.Pid
	e.mu.Lock()
	e.pids[pid] = true
	e.mu.Unlock()
	go func() {
		cmd.Wait()
		e.mu.Lock()
		delete(e.pids, pid)
		e.mu.Unlock()
	}()
}

// Exiting reports whether pid is the init of a sandbox whose Wait
// returned before its end, which is being reaped: a process of dal's own,
// not one the agent left.
func Exiting(pid int) bool {
	exiting.mu.Lock()
	defer exiting.mu.Unlock()
	return exiting.pids[pid]
}

// Ended reports how the agent of a waited-for c ended: the signal that
// killed it (0 when it exited) and how many processes it left running in
// the sandbox, which the end of the sandbox killed. ok is false when the
// init could not say (it was killed).
func (c *Cmd) Ended() (sig syscall.Signal, left int, ok bool) {
	r, ok := c.report()
	return syscall.Signal(r.Signal), r.Left, ok
}

// ThreadsDuring says how many threads the init of a waited-for c under
// the syscall layer started while the agent's tree ran. Each took a pid in
// the agent's namespace, so pids of the tree's later processes may differ
// from run to run; 0 when the init started none or could not say.
func (c *Cmd) ThreadsDuring() int {
	r, _ := c.report()
	return r.Threads
}

// report is the init's exit report, read once, by Wait; ok is false when
// the init wrote none (it was killed) or it was not read before Close. It
// blocks until the init has written it or is gone.
func (c *Cmd) report() (exitReport, bool) {
	c.reportOnce.Do(func() { c.rep, c.repOK = c.readReport() })
	return c.rep, c.repOK
}

func (c *Cmd) readReport() (exitReport, bool) {
	if c.exit == nil {
		return exitReport{}, false
	}
	// Ours of the write end are closed (Ready): the init's end is the
	// only one.
	b, err := io.ReadAll(io.LimitReader(c.exit, 64<<10))
	if err != nil || len(b) == 0 {
		return exitReport{}, false
	}
	var r exitReport
	if json.Unmarshal(b, &r) != nil {
		return exitReport{}, false
	}
	return r, true
}

// Close closes every descriptor c owns: the parent's ends of the status
// pipe, gate and policy channel, and its copies of the init's descriptors.
// Wait calls it; call it yourself for a command that is never started or
// never waited. It neither stops nor reaps a started init: the agent may
// run on (kill it with Process.Kill; Wait reaps it). Calling it again
// does nothing.
func (c *Cmd) Close() error {
	c.closeOnce.Do(func() {
		errs := []error{closeAll(c.child)}
		if c.status != nil {
			errs = append(errs, ignoreClosed(c.status.Close()))
		}
		if c.exit != nil {
			errs = append(errs, ignoreClosed(c.exit.Close()))
		}
		c.closeGate()
		c.settle.close()
		if c.policy != nil {
			errs = append(errs, ignoreClosed(c.policy.Close()))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// closeAll closes fs, some of which may be closed already.
func closeAll(fs []*os.File) error {
	var errs []error
	for _, f := range fs {
		errs = append(errs, ignoreClosed(f.Close()))
	}
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
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
