// Command goagent is a Go agent that opts in to dal's timers: timers,
// tickers, AfterFunc and a context deadline on the virtual clock.
// Lines: "<kind> <name> <value>".
package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/agent"
)

func main() {
	defer agent.Close()
	start := agent.Now()
	var mu sync.Mutex
	var order []string
	at := func(name string) func() {
		return func() {
			mu.Lock()
			order = append(order, fmt.Sprintf("%s@%v", name, agent.Since(start).Round(time.Millisecond)))
			mu.Unlock()
		}
	}
	agent.AfterFunc(300*time.Millisecond, at("a"))
	agent.AfterFunc(100*time.Millisecond, at("b"))
	agent.AfterFunc(100*time.Millisecond, at("c"))
	tick := agent.NewTicker(time.Second)
	ctx, cancel := agent.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	ticks := 0
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			ticks++
		case <-ctx.Done():
		}
	}
	tick.Stop()
	t := agent.NewTimer(time.Minute)
	<-t.C
	mu.Lock()
	fmt.Println("fixed order", strings.Join(order, ","))
	mu.Unlock()
	fmt.Println("fixed ticks", ticks, ctx.Err())
	fmt.Println("fixed elapsed", agent.Since(start).Round(time.Millisecond))
	fmt.Println("fixed now", agent.Now().Format(time.RFC3339))
	fmt.Println("random rand", agent.Rand().Int63())
}
