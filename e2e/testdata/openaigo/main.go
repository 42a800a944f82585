// Command openaigo is an agent using the official Go SDK,
// github.com/openai/openai-go (a module of its own, so that dal's go.mod
// does not depend on it): chat completions (two plain calls, a streamed
// one event by event, a tool call, a stream closed after its first
// event), then the Responses API alike, and a Responses stream it closes
// after the first text delta; against
// $LLM_BASE with $OPENAI_API_KEY (SSL_CERT_FILE is trusted, as Go does on
// Linux).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

var weather = map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "agent error:", err)
	os.Exit(3)
}

func main() {
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(os.Getenv("LLM_BASE")), option.WithAPIKey(os.Getenv("OPENAI_API_KEY")), option.WithMaxRetries(0))
	for _, text := range []string{"hello", "again"} {
		r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}, Temperature: openai.Float(0)})
		if err != nil {
			fail(err)
		}
		fmt.Println("plain:", r.Choices[0].Message.Content)
	}
	s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")}})
	for s.Next() {
		c := s.Current()
		if len(c.Choices) > 0 {
			fmt.Printf("event: %q %q\n", c.Choices[0].Delta.Content, c.Choices[0].FinishReason)
		}
	}
	if err := s.Err(); err != nil {
		fail(err)
	}
	s.Close()
	t, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: weather})}})
	if err != nil {
		fail(err)
	}
	f := t.Choices[0].Message.ToolCalls[0].Function
	fmt.Println("tool:", f.Name, f.Arguments)
	ce := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "test-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("close early")}})
	for ce.Next() {
		fmt.Printf("early chunk: %q\n", ce.Current().Choices[0].Delta.Content)
		break
	}
	if err := ce.Err(); err != nil {
		fail(err)
	}
	ce.Close()

	input := func(s string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
	}
	for _, text := range []string{"hello", "again"} {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "test-model", Input: input(text)})
		if err != nil {
			fail(err)
		}
		fmt.Println("responses plain:", r.OutputText())
	}
	rs := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "test-model", Input: input("stream please")})
	for rs.Next() {
		e := rs.Current()
		fmt.Printf("responses event: %d %s %q\n", e.SequenceNumber, e.Type, e.Delta)
	}
	if err := rs.Err(); err != nil {
		fail(err)
	}
	rs.Close()
	rt, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "test-model", Input: input("weather?"),
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: weather, Strict: openai.Bool(false)}}}})
	if err != nil {
		fail(err)
	}
	fmt.Println("responses tool:", rt.Output[0].Name, rt.Output[0].Arguments.OfString)
	early := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "test-model", Input: input("close early")})
	for early.Next() {
		e := early.Current()
		fmt.Printf("early event: %s %q\n", e.Type, e.Delta)
		if e.Type == "response.output_text.delta" {
			break
		}
	}
	if err := early.Err(); err != nil {
		fail(err)
	}
	early.Close()
	fmt.Println("closed early")
}
