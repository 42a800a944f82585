// Command go-agent is an example Go agent that opts in to dal through the
// agent package: it prints clock readings, seeded random values and a
// virtual sleep. Run it twice under dal-exec with the same seed and the
// output is identical:
//
//	go build -o /tmp/go-agent ./examples/go && dal-exec run --seed 7 -- /tmp/go-agent
package main

import (
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
}
