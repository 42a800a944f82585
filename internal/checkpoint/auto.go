package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dal-runtime/dal/internal/marks"
)

// Automatic checkpoint kinds (--auto-checkpoint), the rules' checkpoint_on
// values.
const (
	PhaseStart         = "phase_start"          // a phase mark (dal.phase, dal-exec phase)
	ArtifactComplete   = "artifact_complete"    // an artifact an iteration marks, new or changed
	BeforeExternalCall = "before_external_call" // the recording proxy, before it forwards a request
	IterationBoundary  = "iteration_boundary"   // an iteration mark
)

// AutoKinds are the automatic checkpoint kinds, in the rules' order.
var AutoKinds = []string{PhaseStart, ArtifactComplete, BeforeExternalCall, IterationBoundary}

// Auto is the set of automatic checkpoint kinds a run takes.
type Auto map[string]bool

// ParseAuto reads --auto-checkpoint: a comma-separated subset of
// AutoKinds, "all", or "" (none). The error is one sentence for the user.
func ParseAuto(s string) (Auto, error) {
	a := Auto{}
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
		case k == "all":
			for _, k := range AutoKinds {
				a[k] = true
			}
		case contains(AutoKinds, k):
			a[k] = true
		default:
			return nil, fmt.Errorf("--auto-checkpoint: unknown kind %q: use %s, or all", k, strings.Join(AutoKinds, ", "))
		}
	}
	return a, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// RunMarks returns the checkpoint marks to store for a run: the agent's own
// checkpoint marks in marksDir and, for each kind in auto, a checkpoint
// made of the marks that kind follows: phase marks (phase_start), iteration
// marks (iteration_boundary: the iteration's artifacts and its score as
// state; artifact_complete: each artifact the first time an iteration names
// it with that content), and the marks dal wrote in autoDir itself
// (before_external_call). With automatic kinds the checkpoints are put in
// the order their marks were completed (the kernel's change time of each
// mark.json, which no process can set; marks completed within one clock
// tick keep the order of this list) and numbered from 1 in that order;
// without, the agent's marks are returned as they are. Incomplete marks of
// any kind read are returned for the caller to report.
func RunMarks(marksDir, autoDir string, auto Auto) ([]*marks.Mark, []marks.Incomplete, error) {
	own, inc, err := marks.Read(marksDir, marks.Checkpoint)
	if err != nil || len(auto) == 0 {
		return own, inc, err
	}
	var all []ordered
	add := func(rank int, m *marks.Mark, sub int) {
		all = append(all, ordered{m: m, at: completed(m), rank: rank, sub: sub})
	}
	read := func(dir, kind string) ([]*marks.Mark, error) {
		ms, more, err := marks.Read(dir, kind)
		inc = append(inc, more...)
		return ms, err
	}
	if auto[PhaseStart] {
		ms, err := read(marksDir, marks.Phase)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			add(0, autoMark(m, PhaseStart+":"+m.Name, map[string]any{"auto": PhaseStart, "phase": m.Name}, m.Artifacts), 0)
		}
	}
	for _, m := range own {
		add(1, m, 0)
	}
	if auto[IterationBoundary] || auto[ArtifactComplete] {
		ms, err := read(marksDir, marks.Iteration)
		if err != nil {
			return nil, nil, err
		}
		seen := map[string]bool{}
		for _, m := range ms {
			if auto[IterationBoundary] {
				state := map[string]any{"auto": IterationBoundary, "iteration": m.Seq, "score": m.Score}
				if len(m.Dimensions) > 0 {
					state["dimensions"] = m.Dimensions
				}
				add(2, autoMark(m, fmt.Sprintf("%s:%d", IterationBoundary, m.Seq), state, m.Artifacts), 0)
			}
			if !auto[ArtifactComplete] {
				continue
			}
			for i, a := range m.Artifacts {
				if key := a.Path + "\x00" + a.SHA256; !seen[key] {
					seen[key] = true
					state := map[string]any{"auto": ArtifactComplete, "path": a.Path, "sha256": a.SHA256, "iteration": m.Seq}
					add(3, autoMark(m, ArtifactComplete+":"+a.Path, state, []marks.Artifact{a}), i)
				}
			}
		}
	}
	if auto[BeforeExternalCall] && autoDir != "" {
		ms, err := read(autoDir, marks.Checkpoint)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			add(4, m, 0)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.m.Seq != b.m.Seq {
			return a.m.Seq < b.m.Seq
		}
		return a.sub < b.sub
	})
	out := make([]*marks.Mark, len(all))
	for i, o := range all {
		m := *o.m
		m.Seq = i + 1
		out[i] = &m
	}
	return out, inc, nil
}

type ordered struct {
	m         *marks.Mark
	at        time.Time
	rank, sub int
}

// completed is when m's mark.json got its name: its change time, set by
// the kernel (utimensat cannot set it), zero when it cannot be read.
func completed(m *marks.Mark) time.Time {
	fi, err := os.Lstat(filepath.Join(m.Dir, "mark.json"))
	if err != nil {
		return time.Time{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}

// autoMark is a checkpoint mark made from m: its copies (m's directory)
// under a name saying why it was taken, with state.
func autoMark(m *marks.Mark, name string, state map[string]any, arts []marks.Artifact) *marks.Mark {
	b, _ := json.Marshal(state)
	c := *m // keeps where m was read from, for Open
	c.Kind, c.Name, c.Tag, c.State, c.Artifacts = marks.Checkpoint, name, "", b, arts
	c.Score, c.Dimensions = nil, nil
	return &c
}
