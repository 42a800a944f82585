package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// slurmCluster is a one-machine Slurm cluster the test started: munged,
// slurmctld and slurmd in the foreground, with a generated slurm.conf.
type slurmCluster struct {
	dir  string
	conf string
	env  []string
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startSlurm starts the cluster (no systemd: each daemon is a child of
// the test, stopped at its end) and waits until its node is idle.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	for tool, pkg := range map[string]string{"/usr/sbin/munged": "munge", "/usr/sbin/slurmctld": "slurmctld", "/usr/sbin/slurmd": "slurmd", "/usr/bin/sbatch": "slurm-client"} {
		if _, err := os.Stat(tool); err != nil {
			t.Fatalf("%s is missing: install Slurm and munge with apt-get install -y slurm-wlm munge (package %s; scripts/test-deps.sh does)", tool, pkg)
		}
	}
	if os.Getuid() != 0 {
		t.Fatal("a one-machine Slurm cluster runs its daemons as root: run this test as root")
	}
	// Unix sockets need a short path.
	dir, err := os.MkdirTemp("", "dal-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"munge", "state", "spool", "log"} {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	key := make([]byte, 1024)
	rand.Read(key)
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge", "munge.socket")
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	conf := filepath.Join(dir, "slurm.conf")
	text := fmt.Sprintf(`ClusterName=dal
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
ReturnToService=2
SlurmdParameters=config_overrides
MaxArraySize=1001
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, host, freePort(t), freePort(t), sock, dir, runtime.NumCPU())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &slurmCluster{dir: dir, conf: conf, env: []string{"SLURM_CONF=" + conf}}
	daemon := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), c.env...)
		log, _ := os.Create(filepath.Join(dir, "log", filepath.Base(name)+".out"))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			log.Close()
		})
	}
	// Cleanups run last-in first-out: the jobs are cancelled first, the
	// daemons stopped after them.
	daemon("/usr/sbin/munged", "-F", "--force", "--key-file", keyFile, "--socket", sock, "--pid-file", filepath.Join(dir, "munge", "munged.pid"),
		"--log-file", filepath.Join(dir, "log", "munged.log"), "--seed-file", filepath.Join(dir, "munge", "seed"))
	c.waitFor(t, "munged", func() bool { _, err := os.Stat(sock); return err == nil })
	daemon("/usr/sbin/slurmctld", "-D", "-c", "-f", conf)
	daemon("/usr/sbin/slurmd", "-D", "-f", conf, "-N", host)
	t.Cleanup(func() { c.run(t, "scancel", "--user", "root") })
	c.waitFor(t, "an idle node", func() bool {
		out, _ := c.run(t, "sinfo", "-h", "-o", "%T")
		return strings.TrimSpace(out) == "idle"
	})
	return c
}

// run runs a Slurm command against the cluster.
func (c *slurmCluster) run(t *testing.T, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitFor waits until ok, failing with the daemons' logs after two
// minutes (a cluster that does not come up, not a measured time).
func (c *slurmCluster) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, f := range []string{"munged.log", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"} {
				data, _ := os.ReadFile(filepath.Join(c.dir, "log", f))
				fmt.Fprintf(&logs, "--- %s\n%s\n", f, lastLines(data, 15))
			}
			t.Fatalf("the Slurm cluster never had %s:\n%s", what, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestSlurmShardsMerge: contrib/slurm/submit.sh submits an evaluation of
// 20 runs as a job array of 10 shards and a merge job that depends on it
// (afterok) to a one-machine Slurm cluster the test starts; the merged
// report is byte for byte one machine's report of the same runs. A
// dashboard over the results directory shows the ten shards' runs live
// as one running evaluation (run 20's --verify holds it until the test
// has seen all 20 runs), then the merged evaluation once (the merged
// shards are not shown again).
func TestSlurmShardsMerge(t *testing.T) {
	c := startSlurm(t)
	root := t.TempDir()
	results := filepath.Join(root, "results")
	ws := t.TempDir()
	env := append([]string{"DAL_KEY=" + filepath.Join(root, "signing.key"), "DAL_EXEC=" + bin.exec,
		"PATH=" + filepath.Dir(bin.exec) + ":" + os.Getenv("PATH")}, c.env...)
	// Run 20's --verify waits for the release file, so the dashboard is
	// seen with every run recorded and the evaluation still running.
	release := filepath.Join(root, "release")
	eval := []string{"--runs", "20", "--seed", "7", "--workspace", ws, "--label", "framework=sh", "--label", "task=echo",
		"--verify", `if [ "$DAL_RUN_INDEX" = 20 ]; then while [ ! -e ` + release + ` ]; do sleep 0.1; done; fi; test $((DAL_RUN_INDEX % 7)) != 0`,
		"--", "sh", "-c", "echo 42"}
	url := startDashboard(t, env, root)

	submit, _ := filepath.Abs("../contrib/slurm/submit.sh")
	cmd := exec.Command(submit, append([]string{"--shards", "10", "--results", results, "--wait", "--"}, eval...)...)
	cmd.Env = append(os.Environ(), env...)
	type done struct {
		out []byte
		err error
	}
	submitted := make(chan done, 1)
	go func() {
		out, err := cmd.CombinedOutput()
		submitted <- done{out, err}
	}()
	// Live: the ten shards' runs, as one running evaluation.
	type evalJSON struct {
		Dir, State, Framework, Task, Shards string
		N, Total                            int
	}
	model := func() []evalJSON {
		res, err := http.Get(url + "model.json")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m struct{ Evaluations []evalJSON }
		json.NewDecoder(res.Body).Decode(&m)
		return m.Evaluations
	}
	var live []evalJSON
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		live = model()
		if len(live) == 1 && live[0].N == 20 || time.Now().After(deadline) {
			break
		}
	}
	if len(live) != 1 || live[0].State != "running" || live[0].N != 20 || live[0].Total != 20 || live[0].Shards != "10 shards" || live[0].Framework != "sh" {
		t.Fatalf("while run 20 is verified, the dashboard shows %+v, want one running evaluation of 10 shards with 20 runs", live)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := <-submitted
	out, err := d.out, d.err
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(results, "logs", "*"))
		var b strings.Builder
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(l), lastLines(data, 5))
		}
		t.Fatalf("submit.sh: %v\n%s\n%s", err, out, b.String())
	}
	if !strings.Contains(string(out), "array 1-10") || !strings.Contains(string(out), "after every shard succeeded") {
		t.Fatalf("submit.sh said:\n%s", out)
	}
	// Each shard ran as its own array task and recorded its two runs.
	for k := 1; k <= 10; k++ {
		runs, _ := filepath.Glob(filepath.Join(results, fmt.Sprintf("shard-%d", k), "runs", "*"))
		if len(runs) != 2 {
			t.Fatalf("shard %d recorded %d runs, want 2", k, len(runs))
		}
	}
	merged := filepath.Join(results, "merged")
	mlog, _ := os.ReadFile(filepath.Join(results, "logs", "merge.out"))
	if !strings.Contains(string(mlog), "merged 20 runs from 10 shards") {
		t.Fatalf("the merge job said:\n%s", mlog)
	}

	// One machine's evaluation of the same runs (kept, not recorded again).
	one := filepath.Join(root, "one")
	os.MkdirAll(filepath.Join(one, "runs"), 0o755)
	for k := 1; k <= 10; k++ {
		runs, _ := filepath.Glob(filepath.Join(results, fmt.Sprintf("shard-%d", k), "runs", "*"))
		for _, run := range runs {
			if out, err := exec.Command("cp", "-a", run, filepath.Join(one, "runs")).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
		}
	}
	r := dalExec(t, env, append([]string{"consistency", "--report", one}, eval...)...)
	if r.code != 0 || strings.Count(r.stderr, "kept from an earlier evaluation") != 20 {
		t.Fatalf("one machine: exit %d\n%s", r.code, r.stderr)
	}
	for _, f := range []string{"report.json", "report.md", "report.html"} {
		a, err1 := os.ReadFile(filepath.Join(one, f))
		b, err2 := os.ReadFile(filepath.Join(merged, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s of the Slurm merge differs from one machine's (%v, %v)", f, err1, err2)
		}
	}

	// The dashboard shows the merged evaluation once (and one machine's).
	var evals []evalJSON
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if evals = model(); len(evals) == 2 && evals[0].State == "done" && evals[1].State == "done" || time.Now().After(deadline) {
			break
		}
	}
	var dirs []string
	for _, e := range evals {
		if e.State != "done" || e.N != 20 || e.Framework != "sh" || e.Task != "echo" {
			t.Errorf("dashboard: %+v", e)
		}
		dirs = append(dirs, filepath.Base(e.Dir))
	}
	slices.Sort(dirs)
	if strings.Join(dirs, " ") != "merged one" {
		t.Fatalf("the dashboard shows %v, want the merged evaluation and one machine's", dirs)
	}
}
