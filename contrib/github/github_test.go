package github

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dal-runtime/dal/internal/cli"
	ucli "github.com/urfave/cli/v2"
)

// workflow is the part of a GitHub Actions workflow the test reads;
// decoding is strict, so a misspelt key of these fails.
type workflow struct {
	Name string `json:"name"`
	// The key on is YAML 1.1's true to this decoder (GitHub reads it as
	// the string "on").
	On   map[string]any `json:"true"`
	Jobs map[string]struct {
		Needs    any    `json:"needs"`
		RunsOn   string `json:"runs-on"`
		Strategy *struct {
			FailFast *bool `json:"fail-fast"`
			Matrix   struct {
				Shard []int `json:"shard"`
			} `json:"matrix"`
		} `json:"strategy"`
		Steps []struct {
			Name            string            `json:"name"`
			Uses            string            `json:"uses"`
			Run             string            `json:"run"`
			With            map[string]any    `json:"with"`
			Env             map[string]string `json:"env"`
			If              string            `json:"if"`
			ContinueOnError bool              `json:"continue-on-error"`
		} `json:"steps"`
	} `json:"jobs"`
}

func flagNames(c *ucli.Command) []string {
	var names []string
	for _, f := range c.Flags {
		names = append(names, f.Names()...)
	}
	return names
}

// dalCommands finds the dal-exec consistency command lines in a script.
func dalCommands(script string) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.ReplaceAll(script, "\n", " "), ";") {
		words := strings.Fields(line)
		for i := range words {
			if words[i] == "dal-exec" && i+1 < len(words) && words[i+1] == "consistency" {
				out = append(out, words[i+1:])
			}
		}
	}
	return out
}

// TestWorkflow checks that the matrix lists shards 1..N, each records
// --shard K/N, the merge needs them and names dal-exec flags that exist.
func TestWorkflow(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("consistency.yml")
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		t.Fatalf("consistency.yml: %v", err)
	}
	shard, merge := w.Jobs["shard"], w.Jobs["merge"]
	if shard.Strategy == nil || len(shard.Strategy.Matrix.Shard) < 2 {
		t.Fatal("the shard job has no matrix of shards")
	}
	if shard.Strategy.FailFast == nil || *shard.Strategy.FailFast {
		t.Error("fail-fast would cancel the other shards when one fails: set it false")
	}
	n := len(shard.Strategy.Matrix.Shard)
	for k, s := range shard.Strategy.Matrix.Shard {
		if s != k+1 {
			t.Fatalf("the matrix lists shards %v, want 1..%d", shard.Strategy.Matrix.Shard, n)
		}
	}
	if merge.Needs != "shard" {
		t.Errorf("the merge job needs %v, want the shard job", merge.Needs)
	}
	cons := cli.ConsistencyCommand()
	sub := map[string]*ucli.Command{"": cons}
	for _, s := range cons.Subcommands {
		sub[s.Name] = s
	}
	var seen []string
	for _, job := range []string{"shard", "merge"} {
		for _, st := range w.Jobs[job].Steps {
			for _, args := range dalCommands(st.Run) {
				cmd, rest := sub[""], args[1:]
				if len(rest) > 0 && sub[rest[0]] != nil {
					cmd, rest = sub[rest[0]], rest[1:]
				}
				seen = append(seen, job+":"+cmd.Name)
				for _, a := range rest {
					if a == "--" {
						break
					}
					if name, ok := strings.CutPrefix(a, "--"); ok && !slices.Contains(flagNames(cmd), name) {
						t.Errorf("%s job: dal-exec consistency %s has no flag --%s", job, cmd.Name, name)
					}
				}
				if cmd == cons {
					want := fmt.Sprintf("--shard ${{ matrix.shard }}/%d", n)
					if !strings.Contains(st.Run, want) {
						t.Errorf("the shard step does not record %q: %q", want, st.Run)
					}
					if !regexp.MustCompile(`--report shard-\$\{\{ matrix.shard \}\}`).MatchString(st.Run) {
						t.Errorf("the shard step does not report into shard-K: %q", st.Run)
					}
				}
			}
		}
	}
	slices.Sort(seen)
	if want := []string{"merge:compare", "merge:merge", "shard:consistency"}; !slices.Equal(seen, want) {
		t.Errorf("dal-exec commands %q, want %q", seen, want)
	}
}
