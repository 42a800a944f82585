package match

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Result is one comparison under a strategy.
type Result struct {
	Strategy Strategy
	// Status is ExactMatch, SemanticMatch (equal under the strategy),
	// NoMatch, or NotReplayed when the scorer failed (Err).
	Status string
	// Similarity is the semantic score, nil for other strategies.
	Similarity *float64
	// First is the first difference (structural) or the score against the
	// threshold (semantic), for a terminal.
	First string
	// Err says why the comparison could not be made (a failing scorer):
	// the component is not compared, never a match.
	Err string
}

// Matched reports whether the result counts as a match.
func (r Result) Matched() bool { return r.Status == ExactMatch || r.Status == SemanticMatch }

// Compare compares the recorded a with the replayed b of component under
// its strategy; name is the file's path for fs_diff ("" otherwise), which
// picks the structural format.
func (s Spec) Compare(ctx context.Context, component, name string, a, b []byte) Result {
	st := s.For(component)
	r := Result{Strategy: st, Status: NoMatch}
	if bytes.Equal(a, b) {
		r.Status = ExactMatch
		if st == Semantic {
			one := 1.0
			r.Similarity = &one
		}
		return r
	}
	switch st {
	case Structural:
		if d := Structure(a, b, name); d == "" {
			r.Status = SemanticMatch
		} else {
			r.First = "first structural difference: " + d
		}
	case Semantic:
		score, err := s.score(ctx, a, b)
		if err != nil {
			r.Status, r.Err = NotReplayed, err.Error()
			return r
		}
		r.Similarity = &score
		if score >= s.Threshold {
			r.Status = SemanticMatch
			r.First = fmt.Sprintf("similarity %.4f >= %.2f", score, s.Threshold)
		} else {
			r.First = fmt.Sprintf("similarity %.4f below the threshold %.2f", score, s.Threshold)
		}
	}
	return r
}

func (s Spec) score(ctx context.Context, a, b []byte) (float64, error) {
	if s.Scorer != nil {
		return s.Scorer.Score(ctx, a, b)
	}
	return Similarity(a, b), nil
}

// Overall is a replay's status from its components' statuses
// (NotReplayed ones, not compared, are left out; failed says a scorer
// failed, which keeps the replay from matching):
// exact_match when every compared component matched byte for byte,
// semantic_match when every one matched and some only under its strategy,
// no_match when none matched, partial_match otherwise, not_replayed when
// nothing was compared.
func Overall(statuses []string, failed bool) string {
	n, exact, matched := 0, 0, 0
	for _, st := range statuses {
		switch st {
		case ExactMatch:
			exact++
			matched++
		case SemanticMatch:
			matched++
		case NotReplayed:
			continue
		}
		n++
	}
	switch {
	case n == 0 && !failed:
		return NotReplayed
	case matched == 0:
		return NoMatch
	case failed || matched < n:
		return PartialMatch
	case exact == n:
		return ExactMatch
	default:
		return SemanticMatch
	}
}

// Scorer is --similarity-cmd: a command run with sh -c, given the
// recorded and the replayed text as two file paths ($1 and $2), that
// prints one number in [0, 1] on stdout.
type Scorer struct {
	Cmd string
	// Timeout bounds one scoring (0: 2 minutes).
	Timeout time.Duration
}

// NewScorer checks cmd by scoring two identical sample texts: a command
// that fails or prints anything but a number in [0, 1] is refused here,
// before any agent runs.
func NewScorer(ctx context.Context, cmd string) (*Scorer, error) {
	if strings.TrimSpace(cmd) == "" {
		return nil, errors.New("--similarity-cmd is empty: give a command that prints a number in [0, 1] for two files")
	}
	s := &Scorer{Cmd: cmd}
	sample := []byte("dal checks the similarity command with this sentence.\n")
	if _, err := s.Score(ctx, sample, sample); err != nil {
		return nil, fmt.Errorf("--similarity-cmd %q does not work (%v): it gets two file paths and must print a number in [0, 1]", cmd, err)
	}
	return s, nil
}

// Score runs the command on a and b.
func (s *Scorer) Score(ctx context.Context, a, b []byte) (float64, error) {
	dir, err := os.MkdirTemp("", "dal-similarity-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	fa, fb := dir+"/recorded", dir+"/replayed"
	if err := os.WriteFile(fa, a, 0o600); err != nil {
		return 0, err
	}
	if err := os.WriteFile(fb, b, 0o600); err != nil {
		return 0, err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.Cmd+` "$1" "$2"`, "sh", fa, fb)
	var out, errOut limited
	out.max, errOut.max = 4096, 4096
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("it did not finish within %s", timeout)
		}
		msg := strings.TrimSpace(firstLine(errOut.String()))
		if msg != "" {
			return 0, fmt.Errorf("%v: %s", err, msg)
		}
		return 0, err
	}
	text := strings.TrimSpace(out.String())
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("it printed %q, not a number", clip(firstLine(text)))
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("it printed %v, outside [0, 1]", v)
	}
	return v, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// limited keeps the first max bytes written to it and drops the rest.
type limited struct {
	bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*limited)(nil)
