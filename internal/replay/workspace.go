package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/record"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
)

// WorkspaceFor is the workspace revert and replay act on, as an absolute
// path: given (the user's --workspace) when set, else the current
// directory. A bundle never chooses it: the path recorded in env.json is
// only compared with the current directory (or, for a run recorded in a
// subdirectory of its workspace, with the directory that many levels up),
// and a mismatch, or a bundle that is not the user's own recording on
// this machine, is refused in one sentence naming --workspace. name is
// the bundle as the user wrote it, for messages.
func WorkspaceFor(given, name string, b *bundle.Bundle, env *record.RunEnv) (string, error) {
	if given != "" {
		return filepath.Abs(given)
	}
	if why := Foreign(b, env); why != "" {
		return "", runner.UsageError{Err: fmt.Errorf("%s was %s, so it is not acted on in the current directory without your say: pass --workspace DIR", name, why)}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("the current directory: %w", err)
	}
	for _, cand := range candidates(wd, env.Cwd) {
		if sameDir(cand, env.Workspace) {
			return cand, nil
		}
	}
	return "", runner.UsageError{Err: fmt.Errorf("%s was recorded in the workspace %s, not in the current directory %s: run it from the workspace, or pass --workspace DIR to name the one to act on", name, env.Workspace, wd)}
}

// candidates are the directories the current directory wd may be the
// workspace of: wd itself, and, when the run was recorded in the
// subdirectory cwd of its workspace and wd ends with it, wd that many
// levels up.
func candidates(wd, cwd string) []string {
	out := []string{wd}
	if cwd == "" || cwd == "." || filepath.IsAbs(cwd) {
		return out
	}
	rel := filepath.Clean(cwd)
	if strings.HasPrefix(rel, "..") {
		return out
	}
	if up, ok := strings.CutSuffix(wd, string(filepath.Separator)+rel); ok && up != "" {
		out = append(out, up)
	}
	return out
}

// sameDir reports whether a and b are the same existing directory (by
// device and inode: a path through a symbolic link counts as the
// directory it names; neither is written).
func sameDir(a, b string) bool {
	if b == "" || !filepath.IsAbs(b) {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil || !fa.IsDir() {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// laterRun names a bundle beside name (the bundle replayed, as the user
// wrote it) recorded after it in the same workspace, whose post-run state
// the workspace ws is at now: reverting it moves the workspace back
// towards the state the replay needs. "" when there is none. It reads the
// neighbours' env.json and change list without verifying them (revert
// does that); only a hint is made of them.
func laterRun(name, ws string, env *record.RunEnv) string {
	dir := filepath.Dir(name)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	self, _ := os.Stat(name)
	best, bestAt := "", env.StartedAt
	for i, e := range ents {
		if i >= 256 {
			break
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || self != nil && os.SameFile(fi, self) {
			continue
		}
		data, err := record.ReadNoFollow(filepath.Join(p, "env.json"))
		var other record.RunEnv
		if err != nil || json.Unmarshal(data, &other) != nil || other.Workspace != env.Workspace || !other.StartedAt.After(bestAt) {
			continue
		}
		data, err = record.ReadNoFollow(filepath.Join(p, "fs-diff", "changes.json"))
		if err != nil {
			continue
		}
		changes, err := sandbox.ParseChanges(data, "changes.json")
		if err != nil || len(changes) == 0 || sandbox.AtPost(ws, changes) != nil {
			continue
		}
		best, bestAt = p, other.StartedAt
	}
	return best
}
