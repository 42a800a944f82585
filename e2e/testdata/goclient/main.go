// Command goclient is an agent using Go's net/http without dal's agent
// package: two plain chat completions, a streamed one read by read, a
// tool call and a stream closed after its first read, against $LLM_BASE
// (SSL_CERT_FILE is trusted, as Go does on Linux).
//
// Its transport has no dial or handshake timeouts: under the syscall
// layer's virtual clock, net/http's default 30 s dial deadline expired
// before a loopback connect completed in about 1 run in 15 (issue 14's
// Go limits: the runtime's netpoller waits are timed on the virtual clock).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

var client = &http.Client{Transport: &http.Transport{}}

func post(body string) *http.Response {
	req, err := http.NewRequest(http.MethodPost, os.Getenv("LLM_BASE")+"/chat/completions", strings.NewReader(body))
	if err != nil {
		fail(err)
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
	}
	return resp
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "agent error:", err)
	os.Exit(3)
}

func main() {
	for _, text := range []string{"hello", "again"} {
		resp := post(`{"model":"test-model","messages":[{"role":"user","content":"` + text + `"}],"temperature":0}`)
		var r struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			fail(err)
		}
		resp.Body.Close()
		fmt.Println("plain:", r.Choices[0].Message.Content, "uncompressed:", resp.Uncompressed)
	}
	resp := post(`{"model":"test-model","stream":true,"messages":[{"role":"user","content":"stream please"}]}`)
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		fmt.Printf("read: %q\n", buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
		}
	}
	resp.Body.Close()
	resp = post(`{"model":"test-model","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`)
	var t struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		fail(err)
	}
	f := t.Choices[0].Message.ToolCalls[0].Function
	fmt.Println("tool:", f.Name, f.Arguments)

	// A stream the server holds open after its first event: read that,
	// then close the body (the transport closes the connection).
	resp = post(`{"model":"test-model","stream":true,"messages":[{"role":"user","content":"close early"}]}`)
	n, err := resp.Body.Read(buf)
	if err != nil {
		fail(err)
	}
	fmt.Printf("early read: %q\n", buf[:n])
	resp.Body.Close()
	fmt.Println("closed early")
}
