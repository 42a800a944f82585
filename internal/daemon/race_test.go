//go:build race

package daemon

// raceDetector says the race detector is on (go test -race): it keeps
// shadow memory for every page of heap the process touched, and returns
// none of it, so RSS no longer tells what dald returned.
const raceDetector = true
