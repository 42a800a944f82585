// Package prompts extracts the LLM calls of a run from its network.har
// entries into a bundle's prompts/NNNN.json: provider, model, parameters,
// messages as sent, the response (streamed ones reassembled), usage and
// finish reason. It reads redacted [har.Entry] values only, so a prompt
// file holds no secret the HAR does not.
//
// # Recognised calls
//
// A POST whose JSON body has the API's shape, on any host (local
// OpenAI-compatible servers such as Ollama or vLLM count):
//
//	api               path ends in            body has
//	chat.completions  /chat/completions       messages
//	responses         /responses              input or model
//	messages          /messages               messages, and max_tokens or an
//	                                          anthropic-version header or an
//	                                          Anthropic host
//
// provider is "openai" on api.openai.com, "anthropic" on
// api.anthropic.com or for the messages API, else "openai-compatible".
//
// # prompts/NNNN.json
//
// One file per call, numbered from 0001 in the order of the exchanges
// (their seq), indented JSON with the fields in this order:
//
//	seq                 the exchange's _dal.seq
//	provider, api, url  as above; url redacted
//	status              HTTP status (0: the exchange failed)
//	model               the response's model, else the request's
//	parameters          every request field but the conversation
//	                    (model, stream, stream_options, temperature,
//	                    max_tokens, tools, seed, stop, ...), keys sorted;
//	                    not messages, input, system, instructions
//	system              Anthropic system, Responses instructions (omitted
//	                    when absent; chat system messages stay in messages)
//	messages            messages (input for the Responses API) as sent
//	stream              the response was streamed
//	response            {text, tool_calls [{id, type, name, arguments}],
//	                    finish_reason, id, error}
//	usage               {input_tokens, output_tokens, total_tokens}
//	system_fingerprint  OpenAI's, when present
//	chunks              the stream's SSE events with data, [DONE] aside
//
// finish_reason is the API's own: finish_reason (chat), stop_reason
// (messages), the response status or its incomplete reason (responses).
// usage maps prompt_tokens/completion_tokens to input/output; Anthropic's
// input counts cache creation and cache reads too; total is input +
// output when the API does not give it. Streams are reassembled from the
// stored body's SSE events: chat deltas with tool calls merged by index
// and the include_usage chunk; Responses output_text and
// function_call_arguments deltas with response.completed's usage and
// status; Anthropic message_start, text_delta and input_json_delta per
// content block, and message_delta's stop_reason and output tokens. Of a
// stream the client closed early, only the chunks it had read count
// (_dal.client_closed.chunks): the rest never reached the agent.
package prompts
