package consistency

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles docs/schema/<name>.
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	abs, err := filepath.Abs(filepath.Join("..", "..", "docs", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("%s does not compile as JSON Schema 2020-12: %v", name, err)
	}
	return s
}

// validate fails t unless data is valid against s.
func validate(t *testing.T, s *jsonschema.Schema, data []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Errorf("the output does not match the schema: %v\n%s", err, data)
	}
}

// TestReportSchema: report.json, what consistency --json prints, is valid
// against docs/schema/consistency-report.schema.json in the cases that
// leave statistics out (one run, every run failed) as well as the usual.
func TestReportSchema(t *testing.T) {
	t.Parallel()
	s := compileSchema(t, "consistency-report.schema.json")
	bad, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"schema_version": 2, "command": [], "runs": 0, "seeds": [],
		"answer_source": "stdout", "consensus": {"verdict": "maybe"}, "variance": {}, "reliability": null, "individual_runs": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Validate(bad) == nil {
		t.Fatal("the schema accepts a report with the verdict \"maybe\"")
	}
	for _, tc := range []struct {
		name  string
		n     int
		agent fakeAgent
	}{
		{"one run", 1, func(int, uint64) (int, string, int64, int64) { return 0, "42\n", 100, 10 }},
		{"all failed", 3, func(i int, _ uint64) (int, string, int64, int64) { return 1, "", 50 * int64(i), 0 }},
		{"all different", 5, func(i int, _ uint64) (int, string, int64, int64) {
			return 0, fmt.Sprintf("answer %d\n", i), 100 + int64(i), 10
		}},
		{"majority with an outlier", 7, func(i int, _ uint64) (int, string, int64, int64) {
			return 0, "42\n", []int64{0, 100, 101, 99, 100, 102, 5000, 98}[i], 10 * int64(i)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := options(t, tc.n, tc.agent)
			rep, err := Evaluate(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			data, err := rep.JSON()
			if err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile(filepath.Join(o.Dir, "report.json"))
			if err != nil || string(file) != string(data) {
				t.Fatalf("Report.JSON differs from the report.json written (%v)", err)
			}
			f, err := os.Open(filepath.Join(o.Dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			doc, err := jsonschema.UnmarshalJSON(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(doc); err != nil {
				t.Errorf("report.json does not match the schema: %v\n%s", err, data)
			}
		})
	}
}
