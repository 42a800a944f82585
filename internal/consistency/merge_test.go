package consistency

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/consistency/consensus"
	"github.com/dal-runtime/dal/internal/version"
)

// runEnv is what signedRecorder writes into env.json.
type runEnv struct {
	command []string
	mode    string
	dal     string
}

// signedRecorder records real signed bundles (bundle.Create, Commit) with
// what agent says, as record would: env.json, logs/stdout, metrics. The
// start time derives from the seed, so a run recorded twice is the same
// run.
func signedRecorder(agent fakeAgent, key ed25519.PrivateKey, e runEnv) Recorder {
	return func(ctx context.Context, r RunSpec) error {
		exit, stdout, dur, tok := agent(r.Index, r.Seed)
		w, err := bundle.Create(r.Bundle)
		if err != nil {
			return err
		}
		defer w.Abort()
		env := map[string]any{"command": e.command, "mode": e.mode, "seed": r.Seed, "exit_code": exit,
			"started_at":  time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(r.Seed%100000) * time.Second),
			"dal_version": e.dal}
		if err := w.WriteJSON("env.json", env); err != nil {
			return err
		}
		if err := w.WriteFile("logs/stdout", []byte(stdout)); err != nil {
			return err
		}
		m := &bundle.Manifest{WorkflowID: strings.Join(e.command, " "),
			Config:  bundle.Config{Model: bundle.Model{ID: bundle.ModelNone}, ExecutionMode: bundle.ModeStrict},
			Metrics: &bundle.Metrics{DurationMS: dur, TokensInput: tok / 2, TokensOutput: tok - tok/2}}
		return w.Commit(m, key)
	}
}

func testKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

// mixedAgent answers 42 mostly, sometimes 41, sometimes fails.
func mixedAgent(i int, seed uint64) (int, string, int64, int64) {
	switch {
	case i%5 == 0:
		return 1, "", 40 + int64(seed%50), 100
	case i%4 == 0:
		return 0, "log line\n{\"final\": {\"answer\": 41}}\n", 900 + int64(seed%200), 1500 + int64(i)
	}
	return 0, "log line\n{\"final\": {\"answer\": 42}}\n", 900 + int64(seed%200), 1500 + int64(seed%300)
}

var defaultEnv = runEnv{command: []string{"agent"}, mode: "strict", dal: version.Version}

func evalOptions(dir string, n int, agent fakeAgent, e runEnv) Options {
	return Options{Dir: dir, Command: e.command, Mode: e.mode, Seeds: Seeds(7, n), Strategy: consensus.Majority,
		Consensus: consensus.Options{Threshold: consensus.DefaultThreshold}, Score: `echo "0.$DAL_RUN_INDEX"`,
		Answer: AnswerSource{JSON: "$.final.answer"}, Record: signedRecorder(agent, testKey(1), e), Key: testKey(1), Parallel: 3}
}

// shards records an evaluation of n runs as k shards and returns their
// directories.
func shards(t testing.TB, n, k int, agent fakeAgent, e runEnv) []string {
	var dirs []string
	for s := 1; s <= k; s++ {
		dir := filepath.Join(tempDir(t), fmt.Sprintf("shard%d", s))
		o := evalOptions(dir, n, agent, e)
		o.Shard = Shard{Index: s, Count: k}
		rep, err := Evaluate(context.Background(), o)
		if err != nil || rep != nil {
			t.Fatalf("shard %d/%d: report %v, %v", s, k, rep, err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

func tempDir(t testing.TB) string { return t.TempDir() }

var reportFiles = []string{"report.json", "report.md", "report.html"}

// TestMergeEqualsOneMachine: three shards merged give the bytes of one
// machine's evaluation of the same runs, and of a re-evaluation of the
// merged runs.
func TestMergeEqualsOneMachine(t *testing.T) {
	t.Parallel()
	const n = 14
	one := filepath.Join(t.TempDir(), "one")
	if _, err := Evaluate(context.Background(), evalOptions(one, n, mixedAgent, defaultEnv)); err != nil {
		t.Fatal(err)
	}
	dirs := shards(t, n, 3, mixedAgent, defaultEnv)
	copied := filepath.Join(t.TempDir(), "copied")
	if _, err := Merge(context.Background(), dirs, copied, MergeOptions{Copy: true}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(BundlePath(copied, 1)); err != nil || !fi.IsDir() {
		t.Fatalf("--copy: run 1 is not a directory of its own (%v)", err)
	}
	out := filepath.Join(t.TempDir(), "merged")
	rep, err := Merge(context.Background(), dirs, out, MergeOptions{Key: testKey(1).Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(BundlePath(out, 1)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("run 1 is not a link to its shard's bundle (%v)", err)
	}
	if rep.Runs != n || rep.Consensus.Verdict != consensus.VerdictDecided || rep.Consensus.Answer != "42" {
		t.Fatalf("merged report: %d runs, verdict %s, answer %q", rep.Runs, rep.Consensus.Verdict, rep.Consensus.Answer)
	}
	same := func(a, b string) {
		t.Helper()
		for _, f := range reportFiles {
			x, err1 := os.ReadFile(filepath.Join(a, f))
			y, err2 := os.ReadFile(filepath.Join(b, f))
			if err1 != nil || err2 != nil {
				t.Fatalf("%v %v", err1, err2)
			}
			if !bytes.Equal(x, y) {
				t.Errorf("%s of %s and %s differ:\n%s", f, a, b, firstDiff(string(x), string(y)))
			}
		}
	}
	same(one, out)
	same(one, copied)

	// The merged directory is a complete evaluation: evaluating it again
	// keeps every run and writes the same report.
	again := evalOptions(out, n, mixedAgent, defaultEnv)
	again.Record = func(context.Context, RunSpec) error { return fmt.Errorf("a merged run was recorded again") }
	if _, err := Evaluate(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	same(one, out)
	for i := 1; i <= n; i++ {
		b, err := bundle.Open(BundlePath(out, i), bundle.OpenOptions{})
		if err != nil {
			t.Fatalf("merged run %d: %v", i, err)
		}
		b.Close()
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}

// editShard rewrites dir/shard.json through f and signs it again with the
// key of its runs: a shard written wrong by someone who holds the key,
// which merge's checks of the records against the bundles must catch.
func editShard(t *testing.T, dir string, f func(*ShardFile)) {
	t.Helper()
	data := tamperShard(t, dir, f)
	if err := os.WriteFile(filepath.Join(dir, ShardSigFileName), encodeSig(ed25519.Sign(testKey(1), data)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tamperShard rewrites dir/shard.json through f, leaving shard.sig as it
// is, and returns the new bytes.
func tamperShard(t *testing.T, dir string, f func(*ShardFile)) []byte {
	t.Helper()
	path := filepath.Join(dir, ShardFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s ShardFile
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	f(&s)
	if data, err = json.Marshal(s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// plant moves dir/rel out of the shard and leaves a symbolic link to it in
// its place.
func plant(t *testing.T, dir, rel string) {
	t.Helper()
	moved := filepath.Join(t.TempDir(), filepath.Base(rel))
	if err := os.Rename(filepath.Join(dir, rel), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}

// TestMergeRefuses: shards of different evaluations, missing or doubled
// shards and runs, tampered bundles and records are refused with one
// sentence naming the shard (and run), and nothing is written.
func TestMergeRefuses(t *testing.T) {
	t.Parallel()
	const n = 6
	other := func(e runEnv) []string { return shards(t, n, 2, mixedAgent, e) }
	for _, tc := range []struct {
		name  string
		dirs  func() []string
		key   ed25519.PublicKey
		wants []string
	}{
		{"different commands", func() []string {
			a, b := other(defaultEnv), other(runEnv{command: []string{"agent", "-v"}, mode: "strict", dal: version.Version})
			return []string{a[0], b[1]}
		}, nil, []string{"shard 2/2", "differ in command"}},
		{"different modes", func() []string {
			a, b := other(defaultEnv), other(runEnv{command: []string{"agent"}, mode: "seeded", dal: version.Version})
			return []string{a[0], b[1]}
		}, nil, []string{"shard 2/2", "differ in mode"}},
		{"different base seeds", func() []string {
			d := other(defaultEnv)
			editShard(t, d[1], func(s *ShardFile) { s.Evaluation.Seeds = Seeds(8, n) })
			return d
		}, nil, []string{"shard 2/2", "differ in seeds"}},
		{"different dal versions", func() []string {
			d := other(defaultEnv)
			editShard(t, d[1], func(s *ShardFile) { s.DalVersion = "0.0.9" })
			return d
		}, nil, []string{"shard 2/2", "dal 0.0.9"}},
		{"bundles of another dal", func() []string {
			d := other(runEnv{command: []string{"agent"}, mode: "strict", dal: "0.0.9"})
			return d
		}, nil, []string{"shard 1/2", "run 1", "recorded by dal 0.0.9"}},
		{"shard given twice", func() []string { d := other(defaultEnv); return []string{d[0], d[1], d[0]} }, nil,
			[]string{"shard 1/2", "given twice"}},
		{"shard missing", func() []string { return other(defaultEnv)[:1] }, nil, []string{"shard 2/2 is missing"}},
		{"run missing", func() []string {
			d := other(defaultEnv)
			editShard(t, d[1], func(s *ShardFile) { s.Runs = s.Runs[:len(s.Runs)-1] })
			return d
		}, nil, []string{"shard 2/2", "lacks run 6"}},
		{"index duplicated", func() []string {
			d := other(defaultEnv)
			editShard(t, d[0], func(s *ShardFile) { s.Runs = append(s.Runs, s.Runs[0]) })
			return d
		}, nil, []string{"shard 1/2", "run 1 twice"}},
		{"run of another shard", func() []string {
			d := other(defaultEnv)
			editShard(t, d[0], func(s *ShardFile) { s.Runs[0].Index = 2 })
			return d
		}, nil, []string{"shard 1/2", "run 2", "not one of its runs"}},
		{"tampered bundle", func() []string {
			d := other(defaultEnv)
			if err := os.WriteFile(filepath.Join(d[1], "runs", "004", "logs", "stdout"), []byte("{\"final\": {\"answer\": 41}}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, nil, []string{"shard 2/2", "run 4", "modified or corrupted"}},
		// The shard lists each run's head (manifest.json and manifest.sig
		// by digest), so merge does not check each bundle's signature
		// again: a head changed after the shard ran must still fail.
		{"run's manifest.sig replaced", func() []string {
			d := other(defaultEnv)
			resign(t, filepath.Join(d[1], "runs", "004"), testKey(2), nil)
			return d
		}, nil, []string{"shard 2/2", "run 4", "manifest.sig", "not the one that was endorsed", "modified or corrupted"}},
		{"run's manifest changed", func() []string {
			d := other(defaultEnv)
			resign(t, filepath.Join(d[0], "runs", "003"), nil, func(m []byte) []byte {
				return bytes.Replace(m, []byte(`"workflow_id": "agent"`), []byte(`"workflow_id": "agent2"`), 1)
			})
			return d
		}, nil, []string{"shard 1/2", "run 3", "manifest.json", "not the one that was endorsed", "modified or corrupted"}},
		// A shard file of an earlier dal lists no heads: every bundle's
		// signature is checked as before.
		{"run's manifest.sig replaced, shard without heads", func() []string {
			d := other(defaultEnv)
			editShard(t, d[1], func(s *ShardFile) {
				for i := range s.Runs {
					s.Runs[i].Head = ""
				}
			})
			resign(t, filepath.Join(d[1], "runs", "004"), testKey(2), nil)
			return d
		}, nil, []string{"shard 2/2", "run 4", "manifest.sig does not verify manifest.json", "modified or corrupted"}},
		{"bundle of another run", func() []string {
			d := other(defaultEnv)
			for _, p := range []string{"003", "005"} {
				if err := os.Rename(filepath.Join(d[0], "runs", p), filepath.Join(d[0], "runs", p+".x")); err != nil {
					t.Fatal(err)
				}
			}
			os.Rename(filepath.Join(d[0], "runs", "003.x"), filepath.Join(d[0], "runs", "005"))
			os.Rename(filepath.Join(d[0], "runs", "005.x"), filepath.Join(d[0], "runs", "003"))
			return d
		}, nil, []string{"shard 1/2", "run 3", "another run's bundle"}},
		// Run 3's real bundle (the shard's runs directory, its shard.json,
		// its shard.sig) moved out of the shard, a link left in its place:
		// merge must not follow it.
		{"run directory planted as a symbolic link", func() []string {
			d := other(defaultEnv)
			plant(t, d[0], filepath.Join("runs", "003"))
			return d
		}, nil, []string{"shard 1/2", "run 3", "symbolic link"}},
		{"runs directory planted as a symbolic link", func() []string {
			d := other(defaultEnv)
			plant(t, d[1], "runs")
			return d
		}, nil, []string{"shard 2/2", "runs directory is a symbolic link"}},
		{"shard.json planted as a symbolic link", func() []string {
			d := other(defaultEnv)
			plant(t, d[1], ShardFileName)
			return d
		}, nil, []string{"shard2/shard.json is a symbolic link"}},
		{"shard.sig planted as a symbolic link", func() []string {
			d := other(defaultEnv)
			plant(t, d[0], ShardSigFileName)
			return d
		}, nil, []string{"shard1/shard.sig is a symbolic link"}},
		{"tampered shard file", func() []string {
			d := other(defaultEnv)
			tamperShard(t, d[1], func(s *ShardFile) { s.Runs[0].Score = new(float64) })
			return d
		}, nil, []string{"shard 2/2", "shard.sig does not verify shard.json"}},
		{"shard file without a signature", func() []string {
			d := other(defaultEnv)
			if err := os.Remove(filepath.Join(d[0], ShardSigFileName)); err != nil {
				t.Fatal(err)
			}
			return d
		}, nil, []string{"shard1 holds no shard.sig"}},
		{"shard file signed by another key than its runs", func() []string {
			d := other(defaultEnv)
			data := tamperShard(t, d[1], func(s *ShardFile) {
				s.PublicKey = base64.StdEncoding.EncodeToString(testKey(2).Public().(ed25519.PublicKey))
			})
			if err := os.WriteFile(filepath.Join(d[1], ShardSigFileName), encodeSig(ed25519.Sign(testKey(2), data)), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, nil, []string{"shard 2/2", "run 2", "record every run of a shard with one --key"}},
		{"tampered record", func() []string {
			d := other(defaultEnv)
			editShard(t, d[0], func(s *ShardFile) { s.Runs[2].ExitCode = 0; s.Runs[2].Success = true }) // run 5 failed
			return d
		}, nil, []string{"shard 1/2", "run 5", "exit code"}},
		{"tampered answer", func() []string {
			d := other(defaultEnv)
			editShard(t, d[0], func(s *ShardFile) { s.Runs[0].AnswerHash = newAnswer("41").hash })
			return d
		}, nil, []string{"shard 1/2", "run 1", "answer"}},
		{"signed by another key", func() []string { return other(defaultEnv) }, testKey(2).Public().(ed25519.PublicKey),
			[]string{"shard 1/2", "not by the key given with --key"}},
		{"not a shard", func() []string { return []string{t.TempDir()} }, nil, []string{"shard.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "merged")
			_, err := Merge(context.Background(), tc.dirs(), out, MergeOptions{Key: tc.key})
			if err == nil {
				t.Fatal("merged")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range tc.wants {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Count(strings.TrimSuffix(msg, "."), "\n") > 0 {
				t.Errorf("error is more than one line: %q", msg)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused merge wrote %s (%v)", out, err)
			}
		})
	}
}

// TestMergeRefusedKeepsEmptyOut: a refused merge into an existing empty
// directory leaves it there, empty (the links made while the bundles were
// verified are gone).
func TestMergeRefusedKeepsEmptyOut(t *testing.T) {
	t.Parallel()
	d := shards(t, 6, 2, mixedAgent, defaultEnv)
	if err := os.WriteFile(filepath.Join(d[1], "runs", "006", "logs", "stdout"), []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := Merge(context.Background(), d, out, MergeOptions{}); err == nil || !strings.Contains(err.Error(), "run 6") {
		t.Fatalf("merge of a tampered run: %v", err)
	}
	if ents, err := os.ReadDir(out); err != nil || len(ents) > 0 {
		t.Fatalf("a refused merge left %v in %s (%v)", ents, out, err)
	}
}

func TestMergeIntoNonEmpty(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "x"), nil, 0o644)
	if _, err := Merge(context.Background(), []string{t.TempDir()}, out, MergeOptions{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("merge into a non-empty directory: %v", err)
	}
}

func TestParseShard(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Shard{"1/1": {1, 1}, "3/10": {3, 10}, " 10/10 ": {10, 10}} {
		if got, err := ParseShard(in); err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/-2"} {
		if _, err := ParseShard(in); err == nil {
			t.Errorf("ParseShard(%q) did not fail", in)
		}
	}
	if got := (Shard{2, 3}).indices(8); fmt.Sprint(got) != "[2 5 8]" {
		t.Errorf("shard 2/3 of 8 runs: %v", got)
	}
}

// resign rewrites the run bundle dir's manifest.json through edit (when
// given) and its manifest.sig with key's signature of it (when given),
// leaving every other file as it is.
func resign(t *testing.T, dir string, key ed25519.PrivateKey, edit func([]byte) []byte) {
	t.Helper()
	man := filepath.Join(dir, bundle.ManifestFile)
	data, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		changed := edit(data)
		if bytes.Equal(changed, data) {
			t.Fatal("the edit changed nothing")
		}
		if err := os.WriteFile(man, changed, 0o644); err != nil {
			t.Fatal(err)
		}
		data = changed
	}
	if key != nil {
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, data)) + "\n"
		if err := os.WriteFile(filepath.Join(dir, bundle.SignatureFile), []byte(sig), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMergeShardsWithoutHeads: shards written by a dal that listed no
// run heads merge as before, every bundle's signature checked, into the
// report the shards with heads give.
func TestMergeShardsWithoutHeads(t *testing.T) {
	t.Parallel()
	d := shards(t, 6, 2, mixedAgent, defaultEnv)
	withHeads, err := Merge(context.Background(), d, filepath.Join(t.TempDir(), "a"), MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range d {
		editShard(t, dir, func(s *ShardFile) {
			for i := range s.Runs {
				if s.Runs[i].Head == "" {
					t.Errorf("run %d of %s has no head", s.Runs[i].Index, dir)
				}
				s.Runs[i].Head = ""
			}
		})
	}
	without, err := Merge(context.Background(), d, filepath.Join(t.TempDir(), "b"), MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := withHeads.JSON()
	b, _ := without.JSON()
	if !bytes.Equal(a, b) {
		t.Fatalf("the reports differ: %s", firstDiff(string(a), string(b)))
	}
}
