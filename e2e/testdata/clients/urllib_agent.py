"""urllib.request: two plain calls, a streamed one read by read, a tool call, a stream closed after its
first read; then the same over the Responses API and Anthropic's messages API."""
import json
import os
import urllib.request

BASE, KEY = os.environ["LLM_BASE"], os.environ["OPENAI_API_KEY"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def post(body, url=BASE + "/chat/completions", headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers=headers or {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=30)


for text in ("hello", "again"):
    r = post({"model": "test-model", "messages": [{"role": "user", "content": text}], "temperature": 0})
    print("plain:", json.loads(r.read())["choices"][0]["message"]["content"], "ce:", r.headers.get("Content-Encoding"))
r = post({"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "stream please"}]})
while True:
    b = r.read1(65536)
    print("read:", repr(b))
    if not b:
        break
r = post({"model": "test-model", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS})
call = json.loads(r.read())["choices"][0]["message"]["tool_calls"][0]["function"]
print("tool:", call["name"], call["arguments"])
r = post({"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "close early"}]})
print("early read:", repr(r.read1(65536)))
r.close()

# The Responses API and (given ANTHROPIC_BASE_URL) Anthropic's messages API alike; the stream closed
# early is read to its first text delta.
MESSAGES = os.environ.get("ANTHROPIC_BASE_URL", "") + "/v1/messages"
AH = {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""), "anthropic-version": "2023-06-01", "Content-Type": "application/json"}
WEATHER = TOOLS[0]["function"]["parameters"]
APIS = [
    ("responses", BASE + "/responses", None, lambda text, **more: dict({"model": "test-model", "input": text}, **more),
     {"type": "function", "name": "get_weather", "parameters": WEATHER},
     lambda r: r["output"][0]["content"][0]["text"], lambda r: (r["output"][0]["name"], r["output"][0]["arguments"])),
    ("messages", MESSAGES, AH,
     lambda text, **more: dict({"model": "test-model", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}, **more),
     {"name": "get_weather", "input_schema": WEATHER},
     lambda r: r["content"][0]["text"], lambda r: (r["content"][0]["name"], json.dumps(r["content"][0]["input"]))),
]
for api, url, headers, ask, tool, text, call in APIS[:1 + ("ANTHROPIC_BASE_URL" in os.environ)]:
    print(api, "plain:", text(json.loads(post(ask("hello"), url, headers).read())))
    r = post(ask("stream please", stream=True), url, headers)
    while True:
        b = r.read1(65536)
        print(api, "read:", repr(b))
        if not b:
            break
    print(api, "tool:", *call(json.loads(post(ask("weather?", tools=[tool]), url, headers).read())))
    r = post(ask("close early", stream=True), url, headers)
    got = b""
    while b"delta\n" not in got:
        b = r.read1(65536)
        print(api, "early read:", repr(b))
        got += b
    r.close()
print("closed early")
