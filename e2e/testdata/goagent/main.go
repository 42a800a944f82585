// Command goagent is the e2e tests' Go agent. Arguments choose what it does:
//
//	clock N     print N clock readings
//	rand        print seeded random values
//	spawn       run itself twice as children (agent.Command) and print their streams
//	stream      print its stream name
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/dal-runtime/dal/agent"
)

func main() {
	defer agent.Close()
	switch os.Args[1] {
	case "clock":
		var n int
		fmt.Sscan(os.Args[2], &n)
		for range n {
			fmt.Println(agent.Now().Format(time.RFC3339Nano))
		}
	case "rand":
		fmt.Println(agent.Rand().Int63())
	case "stream":
		fmt.Println(agent.Stream())
	case "spawn":
		fmt.Println("parent", agent.Stream())
		for range 2 {
			out, err := agent.Command(os.Args[0], "stream").Output()
			if err != nil {
				fmt.Println("child failed:", err)
				os.Exit(1)
			}
			fmt.Print("child ", string(out))
		}
	}
}
