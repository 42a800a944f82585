package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecover: an Apply or Revert stopped part-way (as by kill -9) leaves
// a journal; Recover completes it from its copies, or rolls it back when
// they are gone, or says truthfully that it cannot; the next Apply
// recovers first. Not parallel: it sets interruptAfter.
func TestRecover(t *testing.T) {
	setup := func(t *testing.T) (Config, []Change, string, string, string, string) {
		cfg, cs, pre, seen := recorded(t)
		bundle := t.TempDir()
		diffDir, preDir := filepath.Join(bundle, "fs-diff"), filepath.Join(bundle, "fs-pre")
		if err := Export(cfg, cs, diffDir, preDir); err != nil {
			t.Fatal(err)
		}
		return cfg, cs, pre, seen, diffDir, preDir
	}
	interrupt := func(t *testing.T, f func() error) {
		t.Helper()
		interruptAfter = 7
		err := f()
		interruptAfter = 0
		if !errors.Is(err, errInterrupted) {
			t.Fatalf("the interrupted operation returned %v", err)
		}
	}
	t.Run("apply completed", func(t *testing.T) {
		cfg, cs, pre, seen, diffDir, _ := setup(t)
		interrupt(t, func() error { return Apply(cfg.Workspace, diffDir, cs) })
		if h := hashOf(t, cfg.Workspace); h == pre || h == seen {
			t.Fatalf("the interrupted apply left the workspace at a state; the test interrupts too late")
		}
		if findJournal(cfg.Workspace) == "" {
			t.Fatal("no journal after the interruption")
		}
		rec, err := Recover(cfg.Workspace)
		if err != nil || rec.Outcome != RecoverCompleted || rec.Op != "apply" || rec.State != "post-run" {
			t.Fatalf("Recover: %+v, %v", rec, err)
		}
		if h := hashOf(t, cfg.Workspace); h != seen {
			t.Errorf("after Recover the workspace is not at the post-run state")
		}
		if findJournal(cfg.Workspace) != "" {
			t.Errorf("the journal is still there")
		}
		if rec, err := Recover(cfg.Workspace); err != nil || rec.Outcome != RecoverNothing {
			t.Errorf("a second Recover: %+v, %v", rec, err)
		}
	})
	t.Run("apply rolled back", func(t *testing.T) {
		cfg, cs, pre, _, diffDir, _ := setup(t)
		interrupt(t, func() error { return Apply(cfg.Workspace, diffDir, cs) })
		os.RemoveAll(diffDir)
		rec, err := Recover(cfg.Workspace)
		if err != nil || rec.Outcome != RecoverRolledBack || rec.State != "pre-run" {
			t.Fatalf("Recover: %+v, %v", rec, err)
		}
		if h := hashOf(t, cfg.Workspace); h != pre {
			t.Errorf("after the rollback the workspace is not at the pre-run state")
		}
	})
	t.Run("revert completed by the next apply", func(t *testing.T) {
		cfg, cs, pre, _, diffDir, preDir := setup(t)
		if err := Apply(cfg.Workspace, diffDir, cs); err != nil {
			t.Fatal(err)
		}
		interrupt(t, func() error { return Revert(cfg.Workspace, preDir, cs) })
		// The next Apply finishes the revert, then applies.
		if err := Apply(cfg.Workspace, diffDir, cs); err != nil {
			t.Fatal(err)
		}
		if err := Revert(cfg.Workspace, preDir, cs); err != nil {
			t.Fatal(err)
		}
		if h := hashOf(t, cfg.Workspace); h != pre {
			t.Errorf("the workspace is not back at the pre-run state")
		}
	})
	t.Run("nothing left to finish or undo", func(t *testing.T) {
		cfg, cs, _, _, diffDir, preDir := setup(t)
		interrupt(t, func() error { return Apply(cfg.Workspace, diffDir, cs) })
		os.RemoveAll(diffDir)
		os.RemoveAll(preDir)
		_, err := Recover(cfg.Workspace)
		if err == nil || !strings.Contains(err.Error(), "at neither its pre-run nor its post-run state") {
			t.Fatalf("Recover: %v", err)
		}
		if findJournal(cfg.Workspace) == "" {
			t.Errorf("the journal was removed though nothing was recovered")
		}
		if err := Apply(cfg.Workspace, diffDir, cs); err == nil || !strings.Contains(err.Error(), "at neither") {
			t.Errorf("Apply over an unrecoverable journal: %v", err)
		}
	})
	t.Run("a failing step is undone", func(t *testing.T) {
		cfg, cs, pre, _, diffDir, _ := setup(t)
		// A damaged copy fails Apply part-way (as a full disk would).
		if err := os.Remove(filepath.Join(diffDir, "files", "renamed-to.txt")); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(diffDir, "files", "renamed-to.txt"), []byte("damaged!!\n"), 0o644)
		err := Apply(cfg.Workspace, diffDir, cs)
		if err == nil || !strings.Contains(err.Error(), "nothing was changed: the workspace is back at its pre-run state") {
			t.Fatalf("Apply with a damaged copy: %v", err)
		}
		if h := hashOf(t, cfg.Workspace); h != pre {
			t.Errorf("the failed Apply left the workspace changed")
		}
		if findJournal(cfg.Workspace) != "" {
			t.Errorf("the journal outlived the rollback")
		}
	})
}
