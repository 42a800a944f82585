package usage

import (
	"errors"
	"fmt"
	"testing"
)

func TestAsFindsTheSentenceUnderContext(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("record: %w", Errorf("workspace %s does not exist: pass an existing directory to --workspace", "/nope"))
	ue, ok := As(err)
	if !ok {
		t.Fatalf("As(%v) found no usage error", err)
	}
	if want := "workspace /nope does not exist: pass an existing directory to --workspace"; ue.Error() != want {
		t.Errorf("sentence %q, want %q", ue.Error(), want)
	}
	if _, ok := As(errors.New("disk full")); ok {
		t.Error("a plain error is taken for a usage error")
	}
	if _, ok := As(nil); ok {
		t.Error("nil is taken for a usage error")
	}
}
