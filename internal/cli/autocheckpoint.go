package cli

import (
	"strings"

	"github.com/dal-runtime/dal/internal/checkpoint"
	ucli "github.com/urfave/cli/v2"
)

// autoCheckpointFlag is --auto-checkpoint of run and record.
func autoCheckpointFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "auto-checkpoint", EnvVars: []string{"DAL_AUTO_CHECKPOINT"},
		Usage: "also checkpoint automatically at " + strings.Join(checkpoint.AutoKinds, ", ") +
			" (a comma-separated subset, or all); before_external_call needs record's proxy"}
}

// autoFromFlags reads --auto-checkpoint (a usage error when bad; none
// when the command has no such flag).
func autoFromFlags(c *ucli.Context) (checkpoint.Auto, error) {
	a, err := checkpoint.ParseAuto(c.String("auto-checkpoint"))
	if err != nil {
		return nil, usageError{Err: err}
	}
	return a, nil
}

// autoCalls reports whether --auto-checkpoint asks for before_external_call
// (checked already by RetentionFromFlags).
func autoCalls(c *ucli.Context) bool {
	a, _ := autoFromFlags(c)
	return a[checkpoint.BeforeExternalCall]
}
