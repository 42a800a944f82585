// Package usage tells a mistake in what the user asked for from a failure
// of dal itself. Whatever layer finds bad input — a flag or an argument,
// an agent's mark, a bundle or workspace that cannot be used as asked —
// returns an Error whose message is one sentence saying what is wrong and
// what to do. dal-exec's cli.Main branches on it: it prints that sentence
// alone, without the help text and without the context outer layers
// wrapped around it, and exits 2.
//
// usage imports nothing of dal's, so formats and mechanisms may use it
// without depending on the command line.
package usage

import (
	"errors"
	"fmt"
)

// Error is a usage error: Err's message is what the user reads.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// Errorf formats a usage error, as fmt.Errorf does.
func Errorf(format string, a ...any) error {
	return Error{fmt.Errorf(format, a...)}
}

// As returns the usage error in err's chain, if there is one.
func As(err error) (Error, bool) {
	var ue Error
	ok := errors.As(err, &ue)
	return ue, ok
}
