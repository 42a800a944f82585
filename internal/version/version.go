// Package version names this build of dal.
package version

// Version is the release, overridden at link time with
// -ldflags "-X github.com/dal-runtime/dal/internal/version.Version=...".
var Version = "0.1.0-dev"
