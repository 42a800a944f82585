package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/dal-runtime/dal/internal/cli"
	ucli "github.com/urfave/cli/v2"
)

// decode reads every document of a YAML file strictly into the official
// API type of its kind: an unknown or misspelt field, or a value of the
// wrong type, fails.
func decode(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "v1 PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		default:
			t.Fatalf("%s: unexpected %s %s", path, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s is not a valid %s: %v", path, meta.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

func job(t *testing.T, path string) *batchv1.Job {
	t.Helper()
	objs := decode(t, path)
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects, want one Job", path, len(objs))
	}
	j, ok := objs[0].(*batchv1.Job)
	if !ok {
		t.Fatalf("%s holds a %T, want a Job", path, objs[0])
	}
	return j
}

// flagsOf lists the flag names (and aliases) of a dal-exec command.
func flagsOf(c *ucli.Command) []string {
	var names []string
	for _, f := range c.Flags {
		names = append(names, f.Names()...)
	}
	return names
}

// checkFlags checks that every --flag in args is one the command has.
func checkFlags(t *testing.T, where string, c *ucli.Command, args []string) {
	t.Helper()
	for _, a := range args {
		if a == "--" {
			return
		}
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if !slices.Contains(flagsOf(c), name) {
				t.Errorf("%s: dal-exec %s has no flag --%s", where, c.Name, name)
			}
		}
	}
}

func subcommand(c *ucli.Command, name string) *ucli.Command {
	for _, s := range c.Subcommands {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// TestManifests decodes the manifests into the Kubernetes API types and
// checks that they fit together: an Indexed Job whose pod K records shard
// K/N of N completions, a merge Job that names all N shard directories on
// the same volume, and flags dal-exec has.
func TestManifests(t *testing.T) {
	t.Parallel()
	pvc := decode(t, "results-pvc.yaml")[0].(*corev1.PersistentVolumeClaim)
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("the results volume is %v: every shard pod mounts it at once, so it must be ReadWriteMany", pvc.Spec.AccessModes)
	}
	shards, merge := job(t, "consistency-shards.yaml"), job(t, "consistency-merge.yaml")

	s := shards.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatal("the shard Job is not an Indexed Job (completionMode: Indexed)")
	}
	if s.Completions == nil || *s.Completions < 2 {
		t.Fatal("the shard Job needs completions: N")
	}
	n := int(*s.Completions)
	for _, j := range []*batchv1.Job{shards, merge} {
		if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %q, want Never (a failed run is a result; a retry is a new pod)", j.Name, j.Spec.Template.Spec.RestartPolicy)
		}
		if len(j.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", j.Name, len(j.Spec.Template.Spec.Containers))
		}
	}
	sc, mc := shards.Spec.Template.Spec.Containers[0], merge.Spec.Template.Spec.Containers[0]
	if sc.Image != mc.Image {
		t.Errorf("the shards run %s, the merge %s: merge with the dal that ran the shards", sc.Image, mc.Image)
	}

	// The shard command: sh -c 'exec dal-exec consistency ...'.
	if !slices.Equal(sc.Command, []string{"sh", "-c"}) || len(sc.Args) != 1 {
		t.Fatalf("the shard container runs %q %q, want sh -c with one script", sc.Command, sc.Args)
	}
	script := sc.Args[0]
	words := strings.Fields(script)
	if len(words) < 3 || !slices.Equal(words[:3], []string{"exec", "dal-exec", "consistency"}) {
		t.Fatalf("the shard script %q does not exec dal-exec consistency", script)
	}
	cons := cli.ConsistencyCommand()
	var args []string
	for _, w := range words[3:] {
		args = append(args, strings.Trim(w, `"'`))
	}
	checkFlags(t, "the shard Job", cons, args)
	wantShard := fmt.Sprintf(`--shard "$((JOB_COMPLETION_INDEX + 1))/%d"`, n)
	if !strings.Contains(script, wantShard) {
		t.Errorf("the shard script does not record shard JOB_COMPLETION_INDEX+1 of %d (%s): %q", n, wantShard, script)
	}
	report := regexp.MustCompile(`--report "([^"$]*)\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)"`).FindStringSubmatch(script)
	if report == nil {
		t.Fatalf("the shard script's --report is not a directory per shard: %q", script)
	}
	for _, f := range []string{"--runs", "--seed"} {
		if !strings.Contains(script, f+" ") {
			t.Errorf("the shard script lacks %s: every shard must be given the same evaluation", f)
		}
	}

	// The merge command names all N shard directories and its report.
	if !slices.Equal(mc.Command, []string{"dal-exec"}) || len(mc.Args) < 2 || mc.Args[0] != "consistency" || mc.Args[1] != "merge" {
		t.Fatalf("the merge container runs %q %q, want dal-exec consistency merge", mc.Command, mc.Args)
	}
	checkFlags(t, "the merge Job", subcommand(cons, "merge"), mc.Args[2:])
	var dirs []string
	for i := 2; i < len(mc.Args); i++ {
		switch a := mc.Args[i]; {
		case strings.HasPrefix(a, "--"):
			i++ // its value
		default:
			dirs = append(dirs, a)
		}
	}
	var want []string
	for k := 1; k <= n; k++ {
		want = append(want, fmt.Sprintf("%s%d", report[1], k))
	}
	if !slices.Equal(dirs, want) {
		t.Errorf("the merge Job merges %q, want the %d shard directories %q", dirs, n, want)
	}

	// Both mount the results volume at the same path, and the key.
	for _, j := range []*batchv1.Job{shards, merge} {
		c := j.Spec.Template.Spec.Containers[0]
		vols := map[string]corev1.Volume{}
		for _, v := range j.Spec.Template.Spec.Volumes {
			vols[v.Name] = v
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			v, ok := vols[m.Name]
			if !ok {
				t.Errorf("%s mounts volume %s, which it does not define", j.Name, m.Name)
				continue
			}
			switch {
			case v.PersistentVolumeClaim != nil:
				if v.PersistentVolumeClaim.ClaimName != pvc.Name {
					t.Errorf("%s mounts claim %s, results-pvc.yaml defines %s", j.Name, v.PersistentVolumeClaim.ClaimName, pvc.Name)
				}
				mounts["results"] = m.MountPath
			case v.Secret != nil:
				mounts["key"] = m.MountPath
			}
		}
		if !strings.HasPrefix(report[1], mounts["results"]+"/") {
			t.Errorf("%s mounts the results at %q, but the shards write to %s", j.Name, mounts["results"], report[1])
		}
		if mounts["key"] == "" {
			t.Errorf("%s does not mount the signing key", j.Name)
		}
	}
	if !bytes.Contains([]byte(strings.Join(mc.Args, " ")), []byte("--key")) {
		t.Error("the merge Job does not check the bundles' signer (--key)")
	}
}
