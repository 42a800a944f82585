package consistency

import (
	"encoding/xml"
	"html/template"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/consistency/consensus"
)

// svgNode is any SVG element, read with encoding/xml.
type svgNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []svgNode  `xml:",any"`
	Text     string     `xml:",chardata"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n svgNode) hasClass(c string) bool { return slices.Contains(strings.Fields(n.attr("class")), c) }

// all returns the elements under n (n included) that have class c.
func (n svgNode) all(c string) []svgNode {
	var out []svgNode
	if n.hasClass(c) {
		out = append(out, n)
	}
	for _, ch := range n.Children {
		out = append(out, ch.all(c)...)
	}
	return out
}

// plots parses every <svg> of page as XML, by data-plot name.
func plots(t *testing.T, page string) map[string]svgNode {
	t.Helper()
	out := map[string]svgNode{}
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatalf("unterminated <svg> in:\n%s", rest[i:])
		}
		frag := rest[i : i+j+len("</svg>")]
		var n svgNode
		if err := xml.Unmarshal([]byte(frag), &n); err != nil {
			t.Fatalf("an SVG plot is not well-formed XML: %v\n%s", err, frag)
		}
		out[n.attr("data-plot")] = n
		rest = rest[i+j:]
	}
}

func runsFor(n int, f func(i int) RunReport) []RunReport {
	var runs []RunReport
	for i := 1; i <= n; i++ {
		r := f(i)
		r.Index, r.Seed, r.OutputHash, r.AnswerHash, r.Answer = i, uint64(100+i), "sha256:abc", "sha256:abc", "42"
		runs = append(runs, r)
	}
	return runs
}

func score(x float64) *float64 { return &x }

func TestHTMLPlots(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		command []string
		runs    []RunReport
		// Marks expected per plot; absent: the plot is not drawn.
		marks map[string]int
		// Runs ringed as outliers in the duration plot.
		durationOutliers []int
		band             bool     // the duration plot shades an interval
		notes            []string // text the page must hold
	}{
		{
			name:    "eight runs with an outlier, tokens and some scores",
			command: []string{"python3", "agent.py"},
			runs: runsFor(8, func(i int) RunReport {
				r := RunReport{Success: i%3 != 0, DurationMS: int64(100 + 3*i), Tokens: int64(1000 + 10*i)}
				if i == 5 {
					r.DurationMS = 900
				}
				if i <= 6 {
					r.Score = score(0.5 + float64(i)/20)
				}
				return r
			}),
			marks:            map[string]int{plotDuration: 8, plotTokens: 8, plotScore: 6, plotSuccess: 2, plotHistogram: 8},
			durationOutliers: []int{5},
			band:             true,
			notes:            []string{"2 run(s) without a value", "ringed: 1 outlier(s)"},
		},
		{
			name:    "one run without tokens",
			command: []string{"true"},
			runs:    runsFor(1, func(int) RunReport { return RunReport{Success: true, DurationMS: 12} }),
			marks:   map[string]int{plotDuration: 1, plotSuccess: 2, plotHistogram: 1},
			notes:   []string{"No run recorded any model tokens", "no interval: it needs at least 2 runs"},
		},
		{
			name:    "identical runs",
			command: []string{"sh", "-c", "echo 1"},
			runs:    runsFor(4, func(int) RunReport { return RunReport{Success: true, DurationMS: 50, Tokens: 7} }),
			marks:   map[string]int{plotDuration: 4, plotTokens: 4, plotSuccess: 2, plotHistogram: 4},
			band:    true,
		},
		{
			name:    "markup in the command is text",
			command: []string{"sh", "-c", `</svg><script>alert("x")</script>`},
			runs:    runsFor(3, func(i int) RunReport { return RunReport{Success: i != 2, DurationMS: int64(10 * i), Tokens: 5} }),
			marks:   map[string]int{plotDuration: 3, plotTokens: 3, plotSuccess: 2, plotHistogram: 3},
			band:    true,
			notes:   []string{"&lt;script&gt;"},
		},
		{
			name:    "no runs",
			command: []string{"agent"},
			marks:   map[string]int{},
			notes:   []string{"No runs."},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := analyse(Options{Command: tc.command, Mode: "strict", Strategy: consensus.Majority, Level: 0.95}, tc.runs, nil)
			data, err := rep.HTML(time.Date(2025, 3, 1, 12, 30, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			page := string(data)
			for _, want := range append([]string{"2025-03-01 12:30 UTC", "strict mode", strings.ReplaceAll(string(rep.Consensus.Verdict), "_", " ")}, tc.notes...) {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			for _, banned := range []string{"<script", "<link", "src=", "href=", "@import", "url("} {
				if strings.Contains(page, banned) {
					t.Errorf("the page is not self-contained or not escaped: it holds %q", banned)
				}
			}
			got := plots(t, page)
			if len(got) != len(tc.marks) {
				t.Errorf("%d plots drawn, want %d", len(got), len(tc.marks))
			}
			for name, want := range tc.marks {
				p, ok := got[name]
				if !ok {
					t.Errorf("plot %s is missing", name)
					continue
				}
				marks := p.all("mark")
				if name == plotHistogram {
					sum := 0
					for _, m := range marks {
						c, err := strconv.Atoi(m.attr("data-count"))
						if err != nil {
							t.Fatalf("histogram bar without a count: %+v", m.Attrs)
						}
						sum += c
					}
					if sum != want {
						t.Errorf("histogram counts %d runs, want %d", sum, want)
					}
					continue
				}
				if len(marks) != want {
					t.Errorf("plot %s has %d marks, want %d", name, len(marks), want)
				}
				if name == plotDuration || name == plotTokens || name == plotScore {
					for _, m := range marks {
						i, _ := strconv.Atoi(m.attr("data-run"))
						if i < 1 || i > len(tc.runs) {
							t.Fatalf("plot %s: mark for run %q", name, m.attr("data-run"))
						}
						if wantClass := map[bool]string{true: "ok", false: "fail"}[tc.runs[i-1].Success]; !m.hasClass(wantClass) {
							t.Errorf("plot %s: run %d is not coloured %s", name, i, wantClass)
						}
					}
				}
			}
			if p, ok := got[plotDuration]; ok {
				var ringed []int
				for _, o := range p.all("outlier") {
					i, _ := strconv.Atoi(o.attr("data-run"))
					ringed = append(ringed, i)
				}
				if !slices.Equal(ringed, tc.durationOutliers) {
					t.Errorf("outliers ringed %v, want %v", ringed, tc.durationOutliers)
				}
				if band := len(p.all("band")) == 1; band != tc.band {
					t.Errorf("interval band drawn: %t, want %t", band, tc.band)
				}
				if len(p.all("mean")) != 1 {
					t.Errorf("the duration plot has no mean line")
				}
			}
			if p, ok := got[plotSuccess]; ok {
				point := p.all("point")[0]
				iv := p.all("interval")[0]
				cx, _ := strconv.ParseFloat(point.attr("cx"), 64)
				x, _ := strconv.ParseFloat(iv.attr("x"), 64)
				w, _ := strconv.ParseFloat(iv.attr("width"), 64)
				if cx < x-0.1 || cx > x+w+0.1 {
					t.Errorf("the success rate (x=%v) is drawn outside its interval [%v, %v]", cx, x, x+w)
				}
			}
		})
	}
}

func TestEvaluateWritesHTML(t *testing.T) {
	t.Parallel()
	o := options(t, 3, func(i int, seed uint64) (int, string, int64, int64) { return 0, "same", int64(10 * i), 100 })
	if _, err := Evaluate(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(o.Dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if p := plots(t, string(data)); len(p[plotDuration].all("mark")) != 3 {
		t.Fatalf("report.html has no duration plot of 3 runs:\n%s", data)
	}
	left, err := filepath.Glob(filepath.Join(o.Dir, ".report*"))
	if err != nil || len(left) > 0 {
		t.Fatalf("temporary files left behind: %v (%v)", left, err)
	}
}

// TestEscapeHTMLIsTemplates: the shapes and rows written outside the
// template are escaped exactly as html/template escapes a string in an
// element's text, a quoted attribute and an SVG <title>, for every byte
// and some strings made of the characters that matter.
func TestEscapeHTMLIsTemplates(t *testing.T) {
	t.Parallel()
	tmpl := template.Must(template.New("").Parse(`<p title="{{.}}">{{.}}</p><svg><rect><title>{{.}}</title></rect><text x="1">{{.}}</text></svg>`))
	inputs := []string{"", "plain", "a+b <x> & 'q' \"d\"", "\x00", "\xff\xfe", "é 😀 +", "&amp;", "]]>", "\uFFFD\x00+"}
	for c := range 256 {
		inputs = append(inputs, "x"+string(rune(c))+"y", string([]byte{byte(c)}))
	}
	parts := []string{"<", ">", "&", "'", "\"", "+", "\x00", "a", "é", "\xc3", " "}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var b strings.Builder
		for range rnd.IntN(12) {
			b.WriteString(parts[rnd.IntN(len(parts))])
		}
		inputs = append(inputs, b.String())
	}
	for _, in := range inputs {
		var got strings.Builder
		if err := tmpl.Execute(&got, in); err != nil {
			t.Fatal(err)
		}
		e := escapeHTML(in)
		want := `<p title="` + e + `">` + e + `</p><svg><rect><title>` + e + `</title></rect><text x="1">` + e + `</text></svg>`
		if got.String() != want {
			t.Errorf("%q: html/template writes %q, escapeHTML %q", in, got.String(), want)
		}
	}
}
