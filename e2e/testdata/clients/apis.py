"""What the Python agents of TestNetworkClients ask over OpenAI's Responses API and (given
ANTHROPIC_BASE_URL) Anthropic's messages API: where, with which headers, what to send, what to print of
the answers. "close early" gets a stream the server holds open after several events; the agents read
one event of it and close."""
import json
import os

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}


class API:
    def __init__(self, name, url, headers, body, tool, text, call):
        self.name, self.url, self.headers = name, url, headers
        self.plain = body("hello")
        self.stream = body("stream please", stream=True)
        self.early = body("close early", stream=True)
        self.tool = body("weather?", tools=[tool])
        self.text, self.call = text, call


def _messages_body(text, **more):
    return dict({"model": "test-model", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}, **more)


APIS = [API("responses", os.environ["LLM_BASE"] + "/responses",
            {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
            lambda text, **more: dict({"model": "test-model", "input": text}, **more),
            {"type": "function", "name": "get_weather", "parameters": WEATHER},
            lambda r: r["output"][0]["content"][0]["text"],
            lambda r: "%s %s" % (r["output"][0]["name"], r["output"][0]["arguments"]))]
if "ANTHROPIC_BASE_URL" in os.environ:
    APIS.append(API("messages", os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
                    {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""), "anthropic-version": "2023-06-01",
                     "Content-Type": "application/json"},
                    _messages_body, {"name": "get_weather", "input_schema": WEATHER},
                    lambda r: r["content"][0]["text"],
                    lambda r: "%s %s" % (r["content"][0]["name"], json.dumps(r["content"][0]["input"]))))
