// Command goprobe prints the Go runtime's and standard library's sources of
// nondeterminism, one per line: "<kind> <name> <value>" (see probe.c). It
// does not import dal's agent package: built with CGO_ENABLED=0, it is what
// an unmodified Go tool sees.
package main

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

func main() {
	start := time.Now()
	fmt.Println("fixed now", start.UnixNano())
	sum := 0
	for i := range 100000 {
		sum += i * i
	}
	fmt.Println("fixed since_loop", time.Since(start).Nanoseconds(), sum)

	b := make([]byte, 16)
	crand.Read(b)
	fmt.Printf("random crypto_rand %x\n", b)
	fmt.Println("random math_rand_v2", rand.Uint64())
	m := map[int]bool{}
	for i := range 32 {
		m[i] = true
	}
	var order []string
	for k := range m {
		order = append(order, fmt.Sprint(k))
	}
	fmt.Println("random map_order", strings.Join(order, ","))
	fmt.Println("fixed getpid", os.Getpid())

	// A 2 s sleep moves the virtual clock by 2 s at once.
	before := time.Now()
	time.Sleep(2 * time.Second)
	fmt.Println("fixed slept", time.Since(before).Nanoseconds())
	fmt.Println("fixed after_sleep", time.Now().UnixNano())
}
