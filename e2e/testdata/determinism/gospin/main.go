// Command gospin waits for a goroutine by spinning on a flag, which with
// one processor (GOMAXPROCS=1, strict mode's default) only the runtime's
// preemption ends: it runs on the clock, which stands still while the
// program reads none. dal moves it after a second (see internal/sysvirt's
// quiet.go), and says so.
package main

import (
	"fmt"
	"sync/atomic"
)

func main() {
	var flag atomic.Bool
	go func() { flag.Store(true) }()
	n := 0
	for !flag.Load() {
		n++
	}
	fmt.Println("spun", n > 0)
}
