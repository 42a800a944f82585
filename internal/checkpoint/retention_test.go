package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

// stored is one checkpoint to put in the store for a retention case.
type stored struct {
	run    string
	ws     int           // workspace index
	age    time.Duration // how long before "now" it was stored
	failed bool
	tag    string
}

func TestRetention(t *testing.T) {
	t.Parallel()
	now := t0.Add(100 * day)
	seven := func(failed bool) []stored {
		var out []stored
		for i := range 7 {
			out = append(out, stored{run: "r", age: time.Duration(7-i) * time.Hour, failed: failed})
		}
		return out
	}
	tests := []struct {
		name          string
		policy        Policy
		cps           []stored
		kept          string // ids left, newest first
		deleted       int
		compacted     int
		deletedReason string
	}{
		{"7 checkpoints, 5 kept", DefaultPolicy(), seven(false), "r/7 r/6 r/5 r/4 r/3", 2, 0, "beyond the 5 most recent of"},
		{"failed run keeps all", DefaultPolicy(), seven(true), "r/7 r/6 r/5 r/4 r/3 r/2 r/1", 0, 0, ""},
		{"tagged kept beyond the count", DefaultPolicy(), func() []stored {
			s := seven(false)
			s[0].tag = "v1"
			return s
		}(), "r/7 r/6 r/5 r/4 r/3 r/1", 1, 0, "beyond"},
		{"tagged kept beyond the age", DefaultPolicy(), []stored{
			{run: "old", age: 400 * day, tag: "forever"}, {run: "old", age: 40 * day},
		}, "old/1", 1, 0, "older than 30d"},
		{"31 days old deleted, 29 kept", DefaultPolicy(), []stored{
			{run: "a", age: 31 * day}, {run: "b", age: 29 * day},
		}, "b/1", 1, 0, "older than 30d"},
		{"old failed run deleted by age", DefaultPolicy(), []stored{
			{run: "f", age: 31 * day, failed: true}, {run: "f", age: 31 * day, failed: true},
		}, "", 2, 0, "older than 30d"},
		{"compress action compacts", Policy{Keep: 5, MaxAge: 30 * day, Aged: AgedCompress}, []stored{
			{run: "a", age: 31 * day}, {run: "a", age: 31 * day}, {run: "b", age: day},
		}, "b/1 a/2 a/1", 0, 2, ""},
		{"count applies before compress", Policy{Keep: 1, MaxAge: 30 * day, Aged: AgedCompress}, []stored{
			{run: "a", age: 31 * day}, {run: "b", age: 32 * day},
		}, "a/1", 1, 1, "beyond the 1 most recent"},
		{"per workspace", DefaultPolicy(), func() []stored {
			var out []stored
			for i := range 6 {
				out = append(out, stored{run: fmt.Sprintf("w%d", i%2), ws: i % 2, age: time.Duration(6-i) * time.Hour})
			}
			return out
		}(), "w1/3 w0/3 w1/2 w0/2 w1/1 w0/1", 0, 0, ""},
		{"the window counts across runs", Policy{Keep: 2}, []stored{
			{run: "r1", age: 3 * time.Hour}, {run: "r2", age: 2 * time.Hour}, {run: "r3", age: time.Hour},
		}, "r3/1 r2/1", 1, 0, "beyond the 2"},
		{"zero policy keeps everything", Policy{}, []stored{{run: "a", age: 1000 * day}, {run: "a", age: 999 * day}}, "a/2 a/1", 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, wss := fill(t, tt.cps, now)
			before := snapshot(t, s.Dir)

			plan, err := s.Plan(tt.policy, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := snapshot(t, s.Dir); !reflect.DeepEqual(got, before) {
				t.Fatalf("Plan changed the store")
			}
			rep, err := s.Prune(tt.policy, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []*Report{plan, rep} {
				if len(r.Deleted) != tt.deleted || len(r.Compacted) != tt.compacted || r.Kept != len(tt.cps)-tt.deleted-tt.compacted {
					t.Errorf("report (dry %v): deleted %d, compacted %d, kept %d", r.DryRun, len(r.Deleted), len(r.Compacted), r.Kept)
				}
				if tt.deleted > 0 && !strings.Contains(r.Deleted[0].Reason, tt.deletedReason) {
					t.Errorf("reason %q; want %q", r.Deleted[0].Reason, tt.deletedReason)
				}
			}
			if !reflect.DeepEqual(ids2(plan.Deleted), ids2(rep.Deleted)) || !reflect.DeepEqual(ids2(plan.Compacted), ids2(rep.Compacted)) {
				t.Errorf("plan %v %v differs from prune %v %v", ids2(plan.Deleted), ids2(plan.Compacted), ids2(rep.Deleted), ids2(rep.Compacted))
			}
			left := mustList(t, s, Filter{})
			if got := ids(left); got != tt.kept {
				t.Errorf("kept %q; want %q", got, tt.kept)
			}
			// Deleted checkpoints' archives are gone, the rest validate,
			// compacted ones are marked and restore.
			for _, d := range rep.Deleted {
				if _, err := os.Stat(d.ArchivePath); !os.IsNotExist(err) {
					t.Errorf("%s: archive still there: %v", d.ID, err)
				}
			}
			chk, err := s.Check()
			if err != nil || len(chk.Damaged) != 0 || chk.Checked != len(left) {
				t.Errorf("Check after prune: %+v %v", chk, err)
			}
			compacted := 0
			for _, c := range left {
				if c.Compacted {
					compacted++
					if !strings.HasSuffix(c.Archive, ".compact.tar.zst") {
						t.Errorf("%s: archive %s", c.ID, c.Archive)
					}
					res, err := s.Restore(c.ID, t.TempDir(), RestoreOptions{})
					if err != nil || len(res.Artifacts) != 1 {
						t.Errorf("restore of compacted %s: %v", c.ID, err)
					}
				}
			}
			if compacted != tt.compacted {
				t.Errorf("%d compacted; want %d", compacted, tt.compacted)
			}
			// A second prune changes nothing.
			again, err := s.Prune(tt.policy, now)
			if err != nil || len(again.Deleted)+len(again.Compacted) != 0 {
				t.Errorf("second prune: %+v %v", again, err)
			}
			// Runs emptied by retention leave no directory behind.
			for _, c := range tt.cps {
				found := strings.Contains(" "+tt.kept, " "+c.run+"/")
				if _, err := os.Stat(filepath.Join(s.Dir, c.run)); found == os.IsNotExist(err) {
					t.Errorf("run dir %s exists %v; checkpoints kept %v", c.run, err == nil, found)
				}
			}
			_ = wss
		})
	}
}

// fill stores cps, one Ingest per checkpoint at its own time.
func fill(t *testing.T, cps []stored, now time.Time) (*Store, []string) {
	t.Helper()
	c := &clock{}
	s := newStore(t, c)
	wss := []string{workspace(t, map[string]string{"f": "0"}, nil), workspace(t, map[string]string{"f": "1"}, nil)}
	for i, cp := range cps {
		c.t = now.Add(-cp.age)
		ws := wss[cp.ws]
		ms := writeMarks(t, ws, mark{name: fmt.Sprintf("cp-%d", i), tag: cp.tag, paths: []string{"f"}})
		if _, err := s.Ingest(Run{ID: cp.run, Workspace: ws, Failed: cp.failed}, ms); err != nil {
			t.Fatal(err)
		}
	}
	return s, wss
}

func ids2(ds []Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func TestIngestAppliesPolicy(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	s := newStore(t, c)
	s.Policy = DefaultPolicy()
	ws := workspace(t, map[string]string{"a": "a"}, nil)
	res := ingest(t, s, Run{ID: "r1"}, ws, "1", "2", "3", "4")
	if res.Pruned == nil || len(res.Pruned.Deleted) != 0 {
		t.Fatalf("first ingest pruned %+v", res.Pruned)
	}
	c.t = t0.Add(time.Minute)
	res = ingest(t, s, Run{ID: "r2"}, ws, "5", "6", "7")
	if got := ids2(res.Pruned.Deleted); !reflect.DeepEqual(got, []string{"r1/1", "r1/2"}) {
		t.Errorf("pruned %v", got)
	}
	if got := ids(mustList(t, s, Filter{})); got != "r2/3 r2/2 r2/1 r1/4 r1/3" {
		t.Errorf("left %s", got)
	}
}

func TestPruneRemovesLeftovers(t *testing.T) {
	t.Parallel()
	s := newStore(t, &clock{t0})
	ws := workspace(t, map[string]string{"a": "a"}, nil)
	ingest(t, s, Run{ID: "r"}, ws, "one")
	dir := filepath.Join(s.Dir, "r")
	// What crashed writers leave: a temporary archive, an archive the
	// manifest never named, a temporary manifest. A user's file stays.
	for _, n := range []string{".0002-two.tar.zst.tmp-123", "0002-two.tar.zst", ".manifest.json.tmp-9", "README"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	rep, err := s.Prune(DefaultPolicy(), t0)
	if err != nil || rep.Kept != 1 || rep.Freed != 3 {
		t.Fatalf("Prune = %+v %v", rep, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "0001-one.tar.zst README manifest.json" {
		t.Errorf("left %v", names)
	}
}

func TestParseAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * day, true}, {"2w", 14 * day, true}, {"36h", 36 * time.Hour, true}, {"0", 0, true},
		{"1.5d", 36 * time.Hour, true}, {"-1d", 0, false}, {"soon", 0, false}, {"-3h", 0, false}, {"d", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseAge(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseAge(%q) = %v, %v", tt.in, got, err)
		}
	}
	if FormatAge(30*day) != "30d" || FormatAge(36*time.Hour) != "36h0m0s" {
		t.Errorf("FormatAge")
	}
	if err := (Policy{Keep: -1}).Validate(); err == nil {
		t.Errorf("negative keep accepted")
	}
	if _, err := ParseAgedAction("shred"); err == nil {
		t.Errorf("unknown action accepted")
	}
}
