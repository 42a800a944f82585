"""httpx (Debian's python3-httpx), async: two plain calls, a streamed one read by read, a tool call, a
stream closed after its first read; then the same over the Responses API and Anthropic's messages API
(apis.py)."""
import asyncio
import os

import httpx
from apis import APIS

BASE, KEY = os.environ["LLM_BASE"], os.environ["OPENAI_API_KEY"]
H = {"Authorization": "Bearer " + KEY}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


async def main():
    async with httpx.AsyncClient(timeout=30) as c:
        for text in ("hello", "again"):
            r = await c.post(BASE + "/chat/completions", headers=H,
                             json={"model": "test-model", "messages": [{"role": "user", "content": text}], "temperature": 0})
            print("plain:", r.json()["choices"][0]["message"]["content"], "ce:", r.headers.get("Content-Encoding"))
        async with c.stream("POST", BASE + "/chat/completions", headers=H,
                            json={"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "stream please"}]}) as r:
            async for b in r.aiter_raw():
                print("read:", repr(b))
        r = await c.post(BASE + "/chat/completions", headers=H,
                         json={"model": "test-model", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS})
        call = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]
        print("tool:", call["name"], call["arguments"])
        async with c.stream("POST", BASE + "/chat/completions", headers=H, json={"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "close early"}]}) as r:
            async for b in r.aiter_raw():
                print("early read:", repr(b))
                break
        for a in APIS:
            print(a.name, "plain:", a.text((await c.post(a.url, headers=a.headers, json=a.plain)).json()))
            async with c.stream("POST", a.url, headers=a.headers, json=a.stream) as r:
                async for b in r.aiter_raw():
                    print(a.name, "read:", repr(b))
            print(a.name, "tool:", a.call((await c.post(a.url, headers=a.headers, json=a.tool)).json()))
            async with c.stream("POST", a.url, headers=a.headers, json=a.early) as r:
                async for b in r.aiter_raw():
                    print(a.name, "early read:", repr(b))
                    break
        print("closed early")

asyncio.run(main())
