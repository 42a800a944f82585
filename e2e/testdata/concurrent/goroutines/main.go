// Command goroutines makes four LLM calls from goroutines with net/http and
// prints the order in which they were answered.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
)

func main() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var order []int
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"tool %d"}]}`, i)
			resp, err := http.Post(os.Getenv("LLM_BASE")+"/chat/completions", "application/json", bytes.NewReader([]byte(body)))
			if err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Println("answered in order", order)
}
