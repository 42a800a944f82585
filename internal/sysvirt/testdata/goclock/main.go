// goclock prints time.Now and the monotonic time a loop took, as a Go
// program without cgo reads them: through the vDSO it finds itself.
package main

import (
	"fmt"
	"time"
)

func main() {
	start := time.Now()
	for range 1000 {
		_ = time.Now()
	}
	fmt.Println(start.Unix(), time.Since(start) > 0, time.Since(start) < time.Second)
}
