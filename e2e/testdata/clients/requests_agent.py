"""requests (Debian's python3-requests): two plain calls, a streamed one read by read, a tool call, a
stream closed (r.close()) after its first read; then the same over the Responses API and Anthropic's
messages API (apis.py)."""
import os

import requests
from apis import APIS

BASE, KEY = os.environ["LLM_BASE"], os.environ["OPENAI_API_KEY"]
H = {"Authorization": "Bearer " + KEY}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]

s = requests.Session()
for text in ("hello", "again"):
    r = s.post(BASE + "/chat/completions", headers=H, timeout=30,
               json={"model": "test-model", "messages": [{"role": "user", "content": text}], "temperature": 0})
    print("plain:", r.json()["choices"][0]["message"]["content"], "ce:", r.headers.get("Content-Encoding"))
with s.post(BASE + "/chat/completions", headers=H, timeout=30, stream=True,
            json={"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "stream please"}]}) as r:
    for b in r.iter_content(chunk_size=None):
        print("read:", repr(b))
r = s.post(BASE + "/chat/completions", headers=H, timeout=30,
           json={"model": "test-model", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS})
call = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]
print("tool:", call["name"], call["arguments"], "ce:", r.headers.get("Content-Encoding"))
r = s.post(BASE + "/chat/completions", headers=H, timeout=30, stream=True, json={"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "close early"}]})
print("early read:", repr(next(r.iter_content(chunk_size=None))))
r.close()
for a in APIS:
    print(a.name, "plain:", a.text(s.post(a.url, headers=a.headers, json=a.plain, timeout=30).json()))
    with s.post(a.url, headers=a.headers, json=a.stream, timeout=30, stream=True) as r:
        for b in r.iter_content(chunk_size=None):
            print(a.name, "read:", repr(b))
    print(a.name, "tool:", a.call(s.post(a.url, headers=a.headers, json=a.tool, timeout=30).json()))
    r = s.post(a.url, headers=a.headers, json=a.early, timeout=30, stream=True)
    print(a.name, "early read:", repr(next(r.iter_content(chunk_size=None))))
    r.close()
print("closed early")
