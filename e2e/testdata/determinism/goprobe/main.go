// Command goprobe prints the Go runtime's and standard library's sources of
// nondeterminism, one per line: "<kind> <name> <value>" (see probe.c). It
// does not import dal's agent package: built with CGO_ENABLED=0, it is what
// an unmodified Go tool sees.
//
// What it prints is what the syscall layer makes repeat for Go today. Two
// sources still vary between same-seed runs, a measured limit (see
// internal/sysvirt's doc), so they are printed at a grain that repeats or
// not at all: the runtime's own threads (sysmon, idle Ms) read the clock at
// moments the scheduler picks and a process's reads share one counter, so
// time.Now moves by a few reads' quanta (8–15 µs in 10 runs) — printed in
// seconds; and the runtime seeds each thread's generator in thread-creation
// order, so math/rand/v2 and map order depend on which thread runs main
// after a sleep — not printed.
package main

import (
	crand "crypto/rand"
	"fmt"
	"os"
	"time"
)

func main() {
	start := time.Now()
	fmt.Println("fixed now", start.Unix())
	sum := 0
	for i := range 100000 {
		sum += i * i
	}
	fmt.Println("fixed since_loop_under_1ms", time.Since(start) < time.Millisecond && sum > 0)

	b := make([]byte, 16)
	crand.Read(b)
	fmt.Printf("random crypto_rand %x\n", b)
	fmt.Println("fixed getpid", os.Getpid())

	// A 2 s sleep moves the virtual clock by 2 s at once.
	before := time.Now()
	time.Sleep(2 * time.Second)
	fmt.Println("fixed slept", time.Since(before).Round(time.Second))
	fmt.Println("fixed after_sleep", time.Now().Unix())
}
