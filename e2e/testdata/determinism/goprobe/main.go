// Command goprobe prints the Go runtime's and standard library's sources of
// nondeterminism, one per line: "<kind> <name> <value>" (see probe.c). It
// does not import dal's agent package: built with CGO_ENABLED=0, it is what
// an unmodified Go tool sees.
//
// Clock values are printed to the nanosecond, as "any" (the runtime's own
// reads before main's follow its map seeds, so the seed moves them): the
// monitor thread's reads do not move the program's clock (internal/sysvirt's
// quiet.go). Map order
// and math/rand/v2 come from the runtime's per-thread generators,
// seeded from AT_RANDOM in thread-creation order; they repeat because the
// agent's threads run under SCHED_BATCH on one CPU (internal/sandbox's
// batch.go). Not always: the runtime's initialization hands the main
// goroutine between two threads, and when a time slice ends inside a
// hand-off the main thread makes a fourth thread, which draws once more
// from its generator. threads_at_main, the first line, is the witness: 4
// instead of 3 threads when main starts.
package main

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"
)

// mapOrder is the iteration order of a map of 16 ints.
func mapOrder() string {
	m := map[int]bool{}
	for i := range 16 {
		m[i] = true
	}
	s := ""
	for k := range m {
		s += strconv.Itoa(k) + ","
	}
	return s
}

func main() {
	threads, _ := os.ReadDir("/proc/self/task")
	fmt.Println("any threads_at_main", len(threads))
	start := time.Now()
	fmt.Println("fixed now", start.Unix())
	fmt.Println("any now_ns", start.UnixNano())
	sum := 0
	for i := range 100000 {
		sum += i * i
	}
	fmt.Println("fixed since_loop_under_1ms", time.Since(start) < time.Millisecond && sum > 0)
	// About 30 ms of work without a clock read: the runtime's monitor
	// thread (sysmon) wakes many times meanwhile and reads the clock.
	loop := time.Now()
	for i := range 50_000_000 {
		sum ^= i * i
	}
	fmt.Println("any busy_loop", time.Since(loop), sum != 1)

	// Two goroutines race through ~25 ms of work each, noting their
	// progress: preemption runs on the clock, which their loops do not
	// read, so one finishes first, every run.
	var mu sync.Mutex
	var order []byte
	var wg sync.WaitGroup
	for _, name := range []byte("ab") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for i := range 10 {
				for j := range 5_000_000 {
					x += j ^ i
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			}
			mu.Lock()
			sum ^= x
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Println("fixed goroutine_race", string(order))

	b := make([]byte, 16)
	crand.Read(b)
	fmt.Printf("random crypto_rand %x\n", b)
	fmt.Println("fixed getpid", os.Getpid())
	fmt.Println("random map_order", mapOrder())
	fmt.Println("random rand_v2", rand.Uint64())

	// A 2 s sleep moves the virtual clock by 2 s at once.
	before := time.Now()
	time.Sleep(2 * time.Second)
	// After a sleep the runtime's own reads and thread hand-offs follow
	// how its threads met the wait, which load changes: a few reads more or
	// less (a replay under CI's load drifted by 4 µs), so the clock is
	// printed to the millisecond.
	fmt.Println("fixed slept", time.Since(before).Round(time.Millisecond))
	fmt.Println("fixed after_sleep", time.Now().Unix())
}
