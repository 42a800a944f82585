// Command go-agent is an example Go agent that opts in to dal through the
// agent package: it prints clock readings, seeded random values, a virtual
// sleep, and a tool call racing its timeout with timers, a ticker and a
// context deadline on the virtual clock. Run it twice under dal-exec with the same seed and the
// output is identical:
//
//	go build -o /tmp/go-agent ./examples/go && dal-exec run --seed 7 -- /tmp/go-agent
package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dal-runtime/dal/agent"
)

func main() {
	defer agent.Close()
	start := agent.Now()
	fmt.Println("stream:", agent.Stream(), "mode:", agent.Mode())
	fmt.Println("now:", start.Format(time.RFC3339Nano))
	r := agent.Rand()
	fmt.Println("rand.Intn(1000):", r.Intn(1000), r.Intn(1000))
	fmt.Println("rand.Float64:", r.Float64())
	key := make([]byte, 16)
	if _, err := io.ReadFull(agent.Reader, key); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("key:", hex.EncodeToString(key))
	agent.Sleep(3 * time.Second)
	fmt.Println("slept:", agent.Since(start))

	// A slow tool (its answer takes 45 s of virtual time) raced against a
	// 30 s deadline, with a heartbeat every 10 s: on the virtual clock this
	// costs milliseconds and prints the same lines on every run.
	ctx, cancel := agent.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer := make(chan string, 1)
	agent.AfterFunc(45*time.Second, func() { answer <- "42" })
	heartbeat := agent.NewTicker(10 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-heartbeat.C:
			fmt.Println("heartbeat:", agent.Since(start).Round(time.Second))
			continue
		case a := <-answer:
			fmt.Println("answer:", a)
		case <-ctx.Done():
			fmt.Println("gave up:", ctx.Err(), "at", agent.Since(start).Round(time.Second))
		}
		break
	}
	retry := agent.NewTimer(5 * time.Second)
	fmt.Println("retry at:", (<-retry.C).Format(time.RFC3339))
}
