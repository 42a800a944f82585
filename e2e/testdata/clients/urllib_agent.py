"""urllib.request: two plain calls, a streamed one read by read, a tool call, a stream closed after its
first read; then the same over the Responses API and Anthropic's messages API (apis.py)."""
import json
import os
import urllib.request

from apis import APIS

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

for a in APIS:
    print(a.name, "plain:", a.text(json.loads(post(a.plain, a.url, a.headers).read())))
    r = post(a.stream, a.url, a.headers)
    while True:
        b = r.read1(65536)
        print(a.name, "read:", repr(b))
        if not b:
            break
    print(a.name, "tool:", a.call(json.loads(post(a.tool, a.url, a.headers).read())))
    r = post(a.early, a.url, a.headers)
    print(a.name, "early read:", repr(r.read1(65536)))  # one read: the first of several events
    r.close()
print("closed early")
