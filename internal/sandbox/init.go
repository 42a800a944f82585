package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// Init must be the first statement of main(): in the process re-executed
// by [Command] it runs the sandbox's init and never returns; otherwise it
// returns at once.
func Init() {
	if len(os.Args) < 2 || os.Args[0] != initArg {
		return
	}
	switch len(os.Args) {
	case 2: // started from dal-exec's image
	case 4: // from dal-sandbox-init (image.go)
		sameBuild(os.Args[2], os.Args[3])
		os.Args = os.Args[:2]
	default:
		return
	}
	nameInit()
	// The agent is forked from this thread, which alone drops its
	// privileges and carries the seccomp filter; it never runs anything
	// else.
	runtime.LockOSThread()
	os.Exit(runInit(os.Args[1]))
}

// Descriptors the parent passes (ExtraFiles).
const (
	statusFD = 3 // write end of the status pipe
	deniedFD = 4 // Staging/denied.jsonl, opened for append
	gateFD   = 5 // the init's end of the gate socket (gate.go)
	countsFD = 6 // Staging/sysvirt.json: what the syscall layer served
	exitFD   = 7 // write end of the exit pipe: how the agent ended (exitReport)
)

// runInit is the init's whole life; it returns the exit status.
func runInit(arg string) int {
	status := os.NewFile(statusFD, "status")
	denied := os.NewFile(deniedFD, "denied")
	syscall.CloseOnExec(statusFD)
	syscall.CloseOnExec(deniedFD)
	syscall.CloseOnExec(gateFD)
	syscall.CloseOnExec(countsFD)
	syscall.CloseOnExec(exitFD)
	countsOut := os.NewFile(countsFD, "counts")
	exitOut := os.NewFile(exitFD, "exit")
	gate := os.NewFile(gateFD, "gate")
	fail := func(err error) int {
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		fmt.Fprint(status, msg)
		return setupExit
	}

	// Catch the forwarded signals before anything else: as PID 1 an
	// unhandled one would be dropped.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)

	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("sandbox: make the init non-dumpable: %v", err))
	}
	// Started by Prestart, the init reads on the gate first the sandbox's
	// configuration, and sets up what depends on it alone (the
	// supervisor's threads, a direct sandbox's fixed mounts) while dal-exec
	// prepares the agent, then the whole spec.
	var sp spec
	// warmed waits for the supervisor's threads, when warmThreads made
	// them, and sets GOMAXPROCS.
	warmed := func(procs int) { runtime.GOMAXPROCS(procs) }
	prestarted := arg == specFollows
	// GOMAXPROCS as started (dal-exec's), before warmThreads raises it,
	// and at most maxProcs.
	procs := min(runtime.GOMAXPROCS(0), maxProcs)
	fixed := false // a direct sandbox's fixed mounts are made
	if prestarted {
		// The staging files first: the init may have started before
		// they existed (Prestart passed placeholders).
		if gone, err := receiveFiles(gate); gone {
			return setupExit // the parent gave up: it reports why
		} else if err != nil {
			return fail(err)
		}
		var early spec
		if gone, err := receiveSpec(gate, &early); gone {
			return setupExit // the parent gave up: it reports why
		} else if err != nil {
			return fail(err)
		}
		warmed = warmThreads(warmCount)
		if early.Direct {
			if err := mountDirectFixed(&early); err != nil {
				return fail(err)
			}
			fixed = true
		}
		if gone, err := receiveSpec(gate, &sp); gone {
			return setupExit
		} else if err != nil {
			return fail(err)
		}
		if !sp.sameFixed(&early) {
			return fail(errors.New("sandbox: the sandbox's configuration changed after its init started"))
		}
	} else if err := json.Unmarshal([]byte(arg), &sp); err != nil {
		return fail(errors.New("the sandbox was started with a malformed specification"))
	}
	if len(sp.Argv) == 0 {
		return fail(errors.New("the sandbox was started with a malformed specification"))
	}
	env := os.Environ()
	if sp.Env != nil {
		env = sp.Env
	}
	mount := mountAll
	if sp.Direct {
		mount = mountDirect
		if fixed {
			mount = mountDirectRun
		}
		sp.Network, sp.Quiet = false, nil
	}
	wsBefore, haveBefore := inodeOf(sp.Workspace)
	if err := mount(&sp); err != nil {
		return fail(err)
	}
	// Read now: this thread is under the seccomp filter once installed,
	// and its stats would wait for the supervisor.
	made := dalMade(&sp, wsBefore, haveBefore)
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		return fail(fmt.Errorf("sandbox: set the host name: %v", err))
	}
	if sp.Network {
		if err := loopbackUp(); err != nil {
			return fail(err)
		}
	}
	if err := os.Chdir(sp.Dir); err != nil {
		return fail(fmt.Errorf("the agent's working directory %s is not reachable in the sandbox: %v", sp.Dir, unwrapPath(err)))
	}
	path, err := lookPath(sp.Argv[0], getenv(env, "PATH"))
	if err != nil {
		return fail(err)
	}
	// The agent leads a session of its own: the caller's terminal is not
	// its controlling terminal, and when the caller has one, the agent
	// gets a pty of the sandbox instead (see terminal).
	term, err := openTerminal()
	if err != nil {
		return fail(err)
	}
	// What replaces the caller's streams once the agent is done, so that
	// the parent need not wait for the init's end (exitReport.Done).
	devNull := -1
	if sp.Direct && !sp.Policy {
		if fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
			devNull = fd
		}
	}
	w := newWatcher(denied, sp.Quiet, sp.Network)
	var rules []sysvirt.Rule
	if sp.Virtual.Enabled() {
		rules = sysvirt.Rules(sp.Virtual)
	}
	if err := w.readMounts(); err != nil {
		return fail(err)
	}
	if sp.Policy {
		if w.policy, err = openPolicyClient(sp.PolicyExempt); err != nil {
			return fail(err)
		}
		// The agent's own exec is gated too, and it happens in a vfork
		// child while this thread holds its P in the raw clone: with one
		// P (an agent pinned to one CPU) the watcher could never run to
		// answer it. Set before the threads are warm, so no thread is
		// added later.
		procs = max(2, procs)
	}
	// Every agent runs without capabilities, a direct sandbox's too: as
	// root, CAP_SYS_ADMIN would unmount its private home and
	// CAP_DAC_READ_SEARCH open any file by handle.
	if err := dropPrivileges(); err != nil {
		return fail(err)
	}
	if err := refuseKernelSharing(); err != nil {
		return fail(err)
	}
	listener, err := installFilter(filterFor{network: sp.Network, policy: sp.Policy, writes: !sp.Direct}, rules)
	if err != nil {
		return fail(err)
	}
	if sp.Virtual.Enabled() {
		// The parent set StartNS, so New reads no clock: this thread is
		// under the filter now, and nothing serves it until w.serve runs.
		w.virt = sysvirt.New(sp.Virtual, listener)
	}
	go w.serve(listener)
	if sp.Gate {
		// Tell the parent we are set up, and wait for its go-ahead.
		var b [1]byte
		b[0] = gateByte
		if _, err := status.Write(b[:]); err != nil {
			return setupExit
		}
		if !serveGate(gate) {
			return setupExit // the parent gave up: it reports why
		}
	}
	if sp.Settle && sp.Gate && w.virt != nil {
		go serveSettle(gate, w.virt)
	} else {
		gate.Close()
	}

	if w.virt != nil {
		// Addresses are an input too: bash seeds $RANDOM with a stack
		// address, runtimes hash and order objects by address. The
		// agent's tree runs without address-space randomization
		// (inherited, like setarch -R).
		if err := noASLR(); err != nil {
			return fail(err)
		}
		// And the order in which its threads run (batch.go).
		if err := batchPolicy(true); err != nil {
			return fail(err)
		}
		// And pids: the agent gets agentPID whatever threads the init
		// started before it, and its tree counts on from there.
		if !prestarted {
			warmed = warmThreads(warmCount)
		}
		warmed(procs)
		if err := setLastPID(agentPID - 1); err != nil {
			return fail(err)
		}
	} else {
		if lastPIDFile != nil {
			lastPIDFile.Close()
		}
		warmed(procs)
	}
	if w.virt != nil {
		// Last before the agent: the BeforeAgent hook may have made
		// more (a socket file on /tmp). On another thread: this one is
		// under the filter now, whose clock reads the supervisor serves.
		told := make(chan struct{})
		go func() { made.tell(w.virt); close(told) }()
		<-told
	}
	unpin, err := PinThread(sp.CPUs)
	if err != nil {
		return fail(err)
	}
	// Under the syscall layer the agent's tree is traced from this
	// thread: exec, fork and clone stops only (see package sysvirt).
	// Otherwise, with limits, until its exec, where they are set.
	attr := &syscall.SysProcAttr{Setsid: true, Ptrace: w.virt != nil || sp.Limits.any()}
	if term != nil {
		attr.Setctty, attr.Ctty = true, term.ctty()
	}
	pid, err := syscall.ForkExec(path, sp.Argv, &syscall.ProcAttr{
		Dir:   sp.Dir,
		Env:   env,
		Files: term.files(),
		Sys:   attr,
	})
	unpin()
	if err != nil {
		return fail(fmt.Errorf("start %s in the sandbox: %v", sp.Argv[0], err))
	}
	if err := limitAgent(pid, sp.Limits, w.virt == nil); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return fail(err)
	}
	if w.virt != nil {
		batchPolicy(false) // the agent's tree keeps it; this thread, its tracer, need not
	}
	if term != nil {
		term.start()
	}
	status.Close()

	go func() {
		for s := range sigs {
			if unix.Kill(-pid, s.(syscall.Signal)) != nil {
				unix.Kill(pid, s.(syscall.Signal))
			}
		}
	}()
	var code int
	var rep exitReport
	if w.virt != nil {
		code = w.virt.Trace(pid)
		rep.Signal = int(w.virt.KilledBy())
		rep.Threads = threadsAfter("/proc/self/task", agentPID)
		if b, err := json.Marshal(w.virt.Counts()); err == nil {
			countsOut.Write(b)
		}
	} else {
		code, rep.Signal = reap(pid)
	}
	countsOut.Close()
	rep.Code, rep.Left = code, leftRunning()
	if term != nil {
		// What the agent left running holds the pty: end it now, as
		// leaving PID 1 would, so its output drains and ends.
		unix.Kill(-1, unix.SIGKILL)
		for {
			if _, err := unix.Wait4(-1, nil, 0, nil); err != nil && err != unix.EINTR {
				break
			}
		}
		term.finish()
	}
	if rep.Left == 0 && sp.Direct && !sp.Policy && devNull >= 0 {
		// Nothing is left for the init to do but exit, which takes
		// about a millisecond (its threads, its namespaces): the
		// parent may go on meanwhile, once the caller's streams are
		// no longer held here.
		for fd := range 3 {
			unix.Dup3(devNull, fd, 0)
		}
		rep.Done = true
	}
	if b, err := json.Marshal(rep); err == nil {
		exitOut.Write(b)
	}
	exitOut.Close()
	return code
}

// reap waits for every child until the agent exits, and returns the
// agent's exit status (128+n when killed by signal n) and that signal.
func reap(agent int) (int, int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 127, 0
		}
		if pid != agent {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), int(ws.Signal())
		}
		return ws.ExitStatus(), 0
	}
}

// exitReport is how the agent ended, for the parent ([Cmd.Ended]): the
// init's own exit status cannot tell an agent killed by signal n from one
// that exited 128+n, nor say what the agent left running, which the
// namespace's end kills.
type exitReport struct {
	Code   int `json:"code"` // the agent's exit status, the init's own
	Signal int `json:"signal,omitempty"`
	Left   int `json:"left,omitempty"` // processes still running when the agent exited
	// Threads the init started while the agent's tree ran (see
	// warmThreads): each took the pid the tree's next process would have
	// had, so later pids may differ from run to run.
	Threads int `json:"threads,omitempty"`
	// Done: the init has nothing left to do but exit, and holds none of
	// the caller's streams; the parent need not wait for its end.
	Done bool `json:"done,omitempty"`
}

// threadsAfter counts the threads in dir (/proc/self/task of the init)
// whose id is above pid, the agent's: in the sandbox's pid namespace ids
// count up from ns_last_pid, which the init set below the agent's just
// before starting it, so those threads started after the agent did.
func threadsAfter(dir string, pid int) int {
	return countIDs(dir, func(tid int) bool { return tid > pid })
}

// leftRunning counts the processes of the sandbox's pid namespace other
// than the init, from its /proc.
func leftRunning() int {
	return countIDs("/proc", func(pid int) bool { return pid != 1 })
}

// countIDs counts the entries of dir named by a number (pids, tids) that
// keep accepts; 0 when dir cannot be read.
func countIDs(dir string, keep func(id int) bool) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil && keep(id) {
			n++
		}
	}
	return n
}

// lookPath finds name in the agent's PATH, inside the sandbox.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", fmt.Errorf("cannot run %s in the sandbox: %v", name, err)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in the sandbox's PATH: check its spelling or PATH", name)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return unwrapPath(err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// unwrapPath drops the *PathError's own path, for messages that name it.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// PinThread sets the affinity of the calling thread (lock it first) to
// cpus (none: nothing to do) and returns what restores it: what the thread
// forks meanwhile keeps cpus. The sandbox's init pins the agent so, and
// the runner an unsandboxed agent.
func PinThread(cpus []int) (restore func() error, err error) {
	if len(cpus) == 0 {
		return func() error { return nil }, nil
	}
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("read CPU affinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("pin to CPUs %v: %w (see the allowed CPUs in /proc/self/status, Cpus_allowed_list)", cpus, err)
	}
	return func() error {
		if err := unix.SchedSetaffinity(0, &old); err != nil {
			return fmt.Errorf("restore CPU affinity: %w", err)
		}
		return nil
	}, nil
}

// addrNoRandomize is ADDR_NO_RANDOMIZE (linux/personality.h).
const addrNoRandomize = 0x0040000

// noASLR turns off address-space randomization for the calling thread
// and what it forks.
func noASLR() error {
	cur, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	if errno != 0 {
		return fmt.Errorf("sandbox: read the personality: %v", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_PERSONALITY, cur|addrNoRandomize, 0, 0); errno != 0 {
		return fmt.Errorf("sandbox: turn off address-space randomization: %v", errno)
	}
	return nil
}

// agentPID is the agent's pid in its sandbox under the syscall layer.
const agentPID = 100

// setLastPID sets the pid namespace's last allocated pid, from a thread
// that kept its capabilities (the init's locked thread dropped them).
func setLastPID(n int) error {
	f := lastPIDFile
	if f == nil {
		return errors.New("sandbox: ns_last_pid was not opened")
	}
	defer f.Close()
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt([]byte(strconv.Itoa(n)), 0)
		done <- err
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("sandbox: fix the agent's pid (ns_last_pid): %v", err)
	}
	return nil
}

// warmCount is how many threads warmThreads leaves idle, and maxProcs the
// init's GOMAXPROCS at most. What needs a thread once the agent runs:
// goroutines running Go code, at most maxProcs; the pty's two relays
// (pty.go), locked to theirs for good; the one goroutine holding the
// syscall layer's real waits (sysvirt's realwait.go); and, briefly, a
// goroutine whose system call outlasts a sysmon tick, whose processor the
// runtime hands to another thread, and the one waiting in the poller. The
// notification loop, the signal loop and the server of
// /proc/sys/kernel/random/uuid got theirs before the agent started (their
// threads are not the warm ones); the seeded devices' writers wait in the
// poller and hold none. So six, and two to spare. Measured (a shell
// script, 24 threads in real waits at once, 16 threads sleeping and
// running date, node, pipelines; three runs each, also beside three busy
// loops): with none warm the init started 1 or 2 threads during a run,
// with 2 warm none. Were there not enough, the run says so
// (exitReport.Threads).
const (
	warmCount = 8
	maxProcs  = 2
)

// warmThreads leaves n idle OS threads in the init's runtime. Threads take
// pids in the agent's namespace: the supervisor's goroutines block in
// system calls, and the runtime would start a thread for them in the
// middle of the agent's tree, shifting every later pid.
//
// It starts them and returns; the function it returns waits until every
// goroutine has let its thread go and then sets GOMAXPROCS to procs. Call
// it before the agent starts: with one P (an agent pinned to one CPU) the
// goroutines take turns after the release, and a goroutine needing a
// thread meanwhile, the agent's start under way, found none idle and the
// runtime made one (a pid in the agent's tree, 1 run in 8 on a loaded
// machine).
//
// The threads start with n processors: with one (an agent pinned to one
// CPU sets GOMAXPROCS=1), each new thread waited for the one before to
// lock and park and hand its processor on, 2-20 ms in all on a loaded
// machine instead of 2-3. They are started from a goroutine of their own,
// off the init's locked thread, whose new threads the runtime makes on its
// template thread, one hand-off more each.
func warmThreads(n int) (wait func(procs int)) {
	runtime.GOMAXPROCS(n)
	var locked, left sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	left.Add(n)
	go func() {
		for range n {
			go func() {
				runtime.LockOSThread() // each holds a thread of its own
				locked.Done()
				<-release
				runtime.UnlockOSThread() // and leaves it idle, for reuse
				left.Done()
			}()
		}
	}()
	return func(procs int) {
		locked.Wait()
		close(release)
		left.Wait()
		runtime.GOMAXPROCS(procs)
	}
}

// getenv returns the value of name in env, the agent's environment.
func getenv(env []string, name string) string {
	for _, kv := range env { // the first wins, as in getenv(3)
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
