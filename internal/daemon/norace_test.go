//go:build !race

package daemon

// raceDetector says the race detector is on (race_test.go).
const raceDetector = false
