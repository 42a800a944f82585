package consistency

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLabels(t *testing.T) {
	t.Parallel()
	l, err := ParseLabels([]string{"framework=langgraph", "task=bug fixing", "team.owner=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	if l["framework"] != "langgraph" || l["task"] != "bug fixing" || l["team.owner"] != "a=b" {
		t.Fatalf("labels %v", l)
	}
	if got := l.String(); got != "framework=langgraph task=bug fixing team.owner=a=b" {
		t.Fatalf("String %q", got)
	}
	for _, bad := range [][]string{{"framework"}, {"Framework=x"}, {"=x"}, {"task="}, {"task=a\nb"}, {"task=a", "task=b"}, {"9task=x"}} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("ParseLabels(%q) accepted", bad)
		}
	}
	if l, err := ParseLabels(nil); err != nil || l != nil {
		t.Fatalf("no flags: %v %v", l, err)
	}
}

// TestLabelsThroughMerge: labels go into the shards' shard.json and
// evaluation.json, and the merge's report.json has them, byte for byte
// as one machine's; shards with other labels are not one evaluation.
func TestLabelsThroughMerge(t *testing.T) {
	t.Parallel()
	const n = 6
	labels := Labels{"framework": "langgraph", "task": "codegen", "owner": "qa"}
	one := filepath.Join(t.TempDir(), "one")
	o := evalOptions(one, n, mixedAgent, defaultEnv)
	o.Labels = labels
	rep, err := Evaluate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Framework != "langgraph" || rep.Task != "codegen" || rep.Labels["owner"] != "qa" || len(rep.EvaluationID) != 16 {
		t.Fatalf("report: framework %q task %q labels %v id %q", rep.Framework, rep.Task, rep.Labels, rep.EvaluationID)
	}
	var onDisk map[string]any
	data, _ := os.ReadFile(filepath.Join(one, "report.json"))
	if err := json.Unmarshal(data, &onDisk); err != nil || onDisk["framework"] != "langgraph" || onDisk["task"] != "codegen" {
		t.Fatalf("report.json lacks framework and task: %v", err)
	}
	var dirs []string
	for s := 1; s <= 2; s++ {
		d := filepath.Join(t.TempDir(), "shard")
		so := evalOptions(d, n, mixedAgent, defaultEnv)
		so.Labels, so.Shard = labels, Shard{Index: s, Count: 2}
		if _, err := Evaluate(context.Background(), so); err != nil {
			t.Fatal(err)
		}
		var sf ShardFile
		data, _ := os.ReadFile(filepath.Join(d, ShardFileName))
		if err := json.Unmarshal(data, &sf); err != nil || sf.Evaluation.Labels["task"] != "codegen" {
			t.Fatalf("shard.json has labels %v (%v)", sf.Evaluation.Labels, err)
		}
		var p Progress
		data, _ = os.ReadFile(filepath.Join(d, ProgressFileName))
		if err := json.Unmarshal(data, &p); err != nil || p.EvaluationID != rep.EvaluationID || p.Shard == nil || p.Shard.Index != s || p.Runs != n {
			t.Fatalf("evaluation.json %+v (%v), want evaluation %s", p, err, rep.EvaluationID)
		}
		dirs = append(dirs, d)
	}
	out := filepath.Join(t.TempDir(), "merged")
	if _, err := Merge(context.Background(), dirs, out, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(one, "report.json"))
	b, _ := os.ReadFile(filepath.Join(out, "report.json"))
	if !bytes.Equal(a, b) {
		t.Fatalf("merged report.json differs from one machine's:\n%s", firstDiff(string(a), string(b)))
	}

	other := filepath.Join(t.TempDir(), "other")
	so := evalOptions(other, n, mixedAgent, defaultEnv)
	so.Labels, so.Shard = Labels{"framework": "crewai", "task": "codegen", "owner": "qa"}, Shard{Index: 2, Count: 2}
	if _, err := Evaluate(context.Background(), so); err != nil {
		t.Fatal(err)
	}
	_, err = Merge(context.Background(), []string{dirs[0], other}, filepath.Join(t.TempDir(), "m"), MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), "labels") {
		t.Fatalf("shards with other labels merged: %v", err)
	}
}
