package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/bench"
	"github.com/dal-runtime/dal/internal/wire"
	"golang.org/x/sys/unix"
)

// daldSessions is how many sessions the dald benchmark holds open at once.
const daldSessions = 1000

// sessionChildEnv names the socket a session child connects to. dal-bench
// re-executes itself with it set: dald's tracer follows a process, and a
// process belongs to one session, so every traced session needs a
// process of its own, as every dal-exec is.
const sessionChildEnv = "DAL_BENCH_SESSION_CHILD"

// sessionChild is one session's process: it opens a strict session on a
// connection of its own, asks dald to trace it (from its next exec on, as
// dal-exec does), prints "traced" or "untraced: why", and execs sleep with
// the connection still open, so the session lives until it is killed.
func sessionChild(sock string) int {
	fail := func(err error) int { fmt.Println("error:", err); return 1 }
	c, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	if err != nil {
		return fail(err)
	}
	open, err := c.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
	if err != nil {
		return fail(err)
	}
	tr, err := c.Call(wire.Request{Op: wire.OpTraceStart, Session: open.Session, FromExec: 1})
	if err != nil {
		return fail(err)
	}
	if tr.Tracing {
		fmt.Println("traced")
	} else {
		fmt.Println("untraced:", tr.Reason)
	}
	// Keep the connection (the only socket here) across the exec.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fail(err)
	}
	for _, e := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
			}
		}
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return fail(err)
	}
	os.Stdout.Close()
	return fail(syscall.Exec(sleep, []string{"sleep", "infinity"}, os.Environ()))
}

// procUsage is a process's resident memory and CPU time so far.
type procUsage struct {
	rssKiB int64
	cpu    time.Duration
}

// readUsage reads VmRSS from /proc/PID/status and utime+stime from
// /proc/PID/stat (clock ticks of 10 ms: USER_HZ is 100 on Linux).
func readUsage(pid int) (procUsage, error) {
	var u procUsage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			u.rssKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // after the command name: field 3 on
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat is short", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	u.cpu = time.Duration(utime+stime) * 10 * time.Millisecond
	return u, nil
}

// daldRound is one dald from start to stop.
type daldRound struct {
	idle, held, closed procUsage
	idleCPU            time.Duration // CPU time of the idle dald over as long as opening took
	open               time.Duration // wall time to open every session
	traced             int
	untraced           string // why a session was not traced, if one was not
}

// daldBench starts dald, reads its RSS and CPU time idle, opens
// daldSessions sessions each held by a process of its own and traced, and
// reads them again: the cost of many concurrent sessions in one dald.
func daldBench(dald string) bench.Figure {
	name := fmt.Sprintf("dald with %s sessions open (each traced)", "1,000")
	if _, err := os.Stat(dald); err != nil {
		return notMeasured(name, "no dald binary: run make build")
	}
	self, err := os.Executable()
	if err != nil {
		return notMeasured(name, err)
	}
	var rounds []daldRound
	for range 3 {
		r, err := daldOnce(dald, self)
		if err != nil {
			return notMeasured(name, err)
		}
		rounds = append(rounds, r)
	}
	var idleMB, heldMB, addedMB, closedMB, cpuMS, idleCPUMS, openS bench.Values
	traced := daldSessions
	var why string
	for _, r := range rounds {
		idleMB = append(idleMB, float64(r.idle.rssKiB)/1024)
		heldMB = append(heldMB, float64(r.held.rssKiB)/1024)
		addedMB = append(addedMB, float64(r.held.rssKiB-r.idle.rssKiB)/1024)
		closedMB = append(closedMB, float64(r.closed.rssKiB)/1024)
		cpuMS = append(cpuMS, float64((r.held.cpu - r.idle.cpu).Milliseconds()))
		idleCPUMS = append(idleCPUMS, float64(r.idleCPU.Milliseconds()))
		openS = append(openS, r.open.Seconds())
		traced = min(traced, r.traced)
		if r.untraced != "" {
			why = r.untraced
		}
	}
	f := bench.Figure{Name: name,
		Value: fmt.Sprintf("+%.1f MB RSS, %.0f ms CPU per 1,000 sessions", addedMB.Median(), cpuMS.Median()),
		Ratio: heldMB.Median() / idleMB.Median(), Baseline: fmt.Sprintf("idle dald %.1f MB RSS, %.0f ms CPU over the same time", idleMB.Median(), idleCPUMS.Median()),
		Detail: fmt.Sprintf("n=%d fresh dalds, each session a process of its own on its own connection; RSS MB with the sessions %s, added %s, after they all closed %s; CPU ms to open them %s (10 ms ticks); opening took %s s wall (min / median / max); %d of %d sessions traced",
			len(rounds), heldMB.Spread("%.1f"), addedMB.Spread("%.1f"), closedMB.Spread("%.1f"), cpuMS.Spread("%.0f"), openS.Spread("%.1f"), traced, daldSessions)}
	if why != "" {
		f.Detail += "; not traced: " + why
	}
	return f
}

func daldOnce(dald, self string) (r daldRound, err error) {
	dir, err := os.MkdirTemp("", "dal-bench-dald-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "dald.sock")
	d := exec.Command(dald, "--socket", sock, "--metrics-addr", "127.0.0.1:0")
	var logs strings.Builder
	d.Stderr = &logs
	if err := d.Start(); err != nil {
		return r, fmt.Errorf("start dald: %w", err)
	}
	defer func() {
		d.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.Process.Kill()
			<-done
		}
	}()
	ctl, err := dialWhenUp(sock, 10*time.Second)
	if err != nil {
		return r, fmt.Errorf("dald did not come up: %v: %s", err, logs.String())
	}
	defer ctl.Close()
	pid := d.Process.Pid

	time.Sleep(500 * time.Millisecond) // let start-up settle
	idle0, err := readUsage(pid)
	if err != nil {
		return r, err
	}
	time.Sleep(idleWindow)
	if r.idle, err = readUsage(pid); err != nil {
		return r, err
	}
	kids, open, err := openSessions(self, sock, &r)
	defer func() {
		for _, k := range kids {
			k.Process.Kill()
			k.Wait()
		}
	}()
	if err != nil {
		return r, err
	}
	r.open = open
	if r.held, err = readUsage(pid); err != nil {
		return r, err
	}
	if st, err := ctl.Call(wire.Request{Op: wire.OpStatus}); err != nil || len(st.Sessions) < daldSessions {
		return r, fmt.Errorf("dald lists %d sessions, want %d (%v)", len(st.Sessions), daldSessions, err)
	}
	// The idle baseline: the CPU time of the same dald before any session,
	// scaled to as long as opening took.
	r.idleCPU = time.Duration(float64(r.idle.cpu-idle0.cpu) * float64(open) / float64(idleWindow))
	for _, k := range kids {
		k.Process.Kill()
		k.Wait()
	}
	kids = nil
	if err := waitSessions(ctl, 0, 20*time.Second); err != nil {
		return r, err
	}
	r.closed, err = readUsage(pid)
	return r, err
}

// idleWindow is how long dald's idle CPU time is read for.
const idleWindow = 2 * time.Second

// openSessions starts daldSessions session children, a few at a time,
// and returns them once every one has its session open.
func openSessions(self, sock string, r *daldRound) ([]*exec.Cmd, time.Duration, error) {
	kids := make([]*exec.Cmd, daldSessions)
	errs := make([]error, daldSessions)
	lines := make([]string, daldSessions)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range kids {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), sessionChildEnv+"="+sock)
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			errs[i] = err
			break
		}
		kids[i] = cmd
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l, err := bufio.NewReader(out).ReadString('\n')
			lines[i] = strings.TrimSpace(l)
			if err != nil && l == "" {
				errs[i] = fmt.Errorf("session child: %v", err)
			}
		}()
	}
	wg.Wait()
	open := time.Since(start)
	var live []*exec.Cmd
	for _, k := range kids {
		if k != nil {
			live = append(live, k)
		}
	}
	for i, l := range lines {
		switch {
		case l == "traced":
			r.traced++
		case strings.HasPrefix(l, "untraced: "):
			r.untraced = strings.TrimPrefix(l, "untraced: ")
		case errs[i] == nil:
			errs[i] = fmt.Errorf("session child said %q", l)
		}
	}
	return live, open, firstErr(errs)
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// dialWhenUp connects to dald as a control client once its socket answers.
func dialWhenUp(sock string, within time.Duration) (*wire.Client, error) {
	deadline := time.Now().Add(within)
	for {
		c, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleCtl})
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSessions waits until dald lists n sessions.
func waitSessions(ctl *wire.Client, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		st, err := ctl.Call(wire.Request{Op: wire.OpStatus})
		if err != nil {
			return err
		}
		if len(st.Sessions) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dald still lists %d sessions %s after their processes ended", len(st.Sessions), within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
