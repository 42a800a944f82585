package match

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Strategy is one of the schema's matching strategies.
type Strategy string

// The strategies.
const (
	Exact      Strategy = "exact"
	Semantic   Strategy = "semantic"
	Structural Strategy = "structural"
)

// DefaultThreshold is the schema's similarity_threshold for semantic
// matching.
const DefaultThreshold = 0.95

// Statuses: the schema's replay_status.match_status values, used per
// component and for a whole replay.
const (
	ExactMatch    = "exact_match"    // byte for byte
	SemanticMatch = "semantic_match" // equal under the semantic or structural strategy
	PartialMatch  = "partial_match"  // some components match, some do not
	NoMatch       = "no_match"       // compared and different
	NotReplayed   = "not_replayed"   // not compared
)

// Components are the replay components a strategy can be chosen for, and
// those compared exactly whatever --match says.
var (
	Relaxable = []string{"stdout", "stderr", "fs_diff", "prompts", "iterations"}
	ExactOnly = []string{"exit_code", "clock", "network"}
)

// Spec is the strategy per component and the semantic settings.
type Spec struct {
	// Default applies to the Relaxable components --match does not name.
	Default Strategy
	// Per holds the components --match names.
	Per map[string]Strategy
	// Threshold is the similarity a semantic match needs, in [0, 1].
	Threshold float64
	// Scorer, when set, replaces the built-in similarity.
	Scorer *Scorer
}

// ExactSpec is the default: every component byte for byte.
func ExactSpec() Spec { return Spec{Default: Exact, Threshold: DefaultThreshold} }

// For returns the strategy of component (exact for ExactOnly and unknown
// components).
func (s Spec) For(component string) Strategy {
	if st, ok := s.Per[component]; ok {
		return st
	}
	if slices.Contains(Relaxable, component) && s.Default != "" {
		return s.Default
	}
	return Exact
}

// IsExact reports whether every component is compared byte for byte.
func (s Spec) IsExact() bool {
	for _, c := range Relaxable {
		if s.For(c) != Exact {
			return false
		}
	}
	return true
}

// String is the spec as --match would give it, e.g.
// "exact,stdout=semantic".
func (s Spec) String() string {
	parts := []string{string(s.Default)}
	if s.Default == "" {
		parts[0] = string(Exact)
	}
	var names []string
	for c := range s.Per {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		parts = append(parts, c+"="+string(s.Per[c]))
	}
	return strings.Join(parts, ",")
}

// Parse reads --match: a strategy for every relaxable component
// ("semantic"), strategies per component ("stdout=semantic,fs_diff=structural"),
// or both ("structural,stdout=semantic"). The error is one sentence for
// the user.
func Parse(s string) (Spec, error) {
	spec := ExactSpec()
	if strings.TrimSpace(s) == "" {
		return spec, nil
	}
	seenDefault := false
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, val, per := strings.Cut(part, "=")
		if !per {
			st, err := parseStrategy(part)
			if err != nil {
				return spec, err
			}
			if seenDefault {
				return spec, fmt.Errorf("--match %q gives two strategies for every component: give one, and COMPONENT=STRATEGY for the others", s)
			}
			seenDefault, spec.Default = true, st
			continue
		}
		name = strings.TrimSpace(name)
		st, err := parseStrategy(strings.TrimSpace(val))
		if err != nil {
			return spec, err
		}
		switch {
		case slices.Contains(Relaxable, name):
		case slices.Contains(ExactOnly, name):
			if st != Exact {
				return spec, fmt.Errorf("--match %s=%s: %s is compared exactly only; relax one of %s", name, st, name, strings.Join(Relaxable, ", "))
			}
		default:
			return spec, fmt.Errorf("--match: unknown component %q: use one of %s", name, strings.Join(append(append([]string{}, Relaxable...), ExactOnly...), ", "))
		}
		if _, dup := spec.Per[name]; dup {
			return spec, fmt.Errorf("--match names %s twice: give each component once", name)
		}
		if spec.Per == nil {
			spec.Per = map[string]Strategy{}
		}
		spec.Per[name] = st
	}
	return spec, nil
}

func parseStrategy(s string) (Strategy, error) {
	switch st := Strategy(s); st {
	case Exact, Semantic, Structural:
		return st, nil
	}
	return "", fmt.Errorf("--match: unknown strategy %q: use exact, semantic or structural (or COMPONENT=STRATEGY)", s)
}

// CheckThreshold refuses a --threshold outside [0, 1].
func CheckThreshold(t float64) error {
	if math.IsNaN(t) || t < 0 || t > 1 {
		return fmt.Errorf("--threshold %v is outside [0, 1]: give a similarity such as 0.95", t)
	}
	return nil
}
