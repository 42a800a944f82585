// Command goheavy is a goroutine-heavy Go program for the syscall layer's
// benchmark. "goheavy pingpong N": a channel ping-pong of N round trips
// between two goroutines; "goheavy timers N": N timers of 10 µs in turn,
// each waited for on its channel. It prints what it did, so a run that
// broke shows.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		usage()
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		usage()
	}
	switch os.Args[1] {
	case "pingpong":
		fmt.Println("round trips", n, "sum", pingPong(n))
	case "timers":
		fmt.Println("timers", timers(n))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goheavy pingpong|timers N")
	os.Exit(2)
}

func pingPong(n int) int {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	sum := 0
	for i := range n {
		ping <- i
		sum += <-pong
	}
	close(ping)
	return sum
}

func timers(n int) int {
	fired := 0
	for range n {
		t := time.NewTimer(10 * time.Microsecond)
		<-t.C
		fired++
	}
	return fired
}
