package cli

import (
	"os"
	"testing"

	"github.com/dal-runtime/dal/internal/sandbox"
)

// TestMain lets the test binary be a sandbox's init: `dal-exec run` in
// strict and seeded modes re-executes it as one (tests call Main in this
// process).
func TestMain(m *testing.M) {
	sandbox.Init() // the re-executed init never returns from here
	os.Exit(m.Run())
}
