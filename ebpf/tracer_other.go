//go:build !linux || !(amd64 || arm64)

package ebpf

import "runtime"

// Tracer is not available on this platform: Open always fails.
type Tracer struct{}

var errPlatform = &UnavailableError{
	Reason: "boundary tracing needs Linux on amd64 or arm64, so no syscall is observed on " + runtime.GOOS + "/" + runtime.GOARCH,
}

// Open returns an *UnavailableError on this platform.
func Open(Options) (*Tracer, error) { return nil, errPlatform }

func (*Tracer) Close() error                      { return nil }
func (*Tracer) Track(int, uint32, int) error      { return errPlatform }
func (*Tracer) SetWorkspace(uint32, string) error { return errPlatform }
func (*Tracer) Untrack(uint32) error              { return errPlatform }
func (*Tracer) Forget(uint32) error               { return errPlatform }
func (*Tracer) Counts(uint32) (*Counts, error)    { return nil, errPlatform }
func (*Tracer) Events(uint32) []Event             { return nil }
func (*Tracer) Drops() (uint64, error)            { return 0, errPlatform }
func (*Tracer) Losses() (Losses, error)           { return Losses{}, errPlatform }
func (*Tracer) Stats() ([]ProgramStats, error)    { return nil, errPlatform }
func (*Tracer) MapBytes() (uint64, error)         { return 0, errPlatform }
func (*Tracer) Attached() bool                    { return false }
func (*Tracer) Attaches() uint64                  { return 0 }
