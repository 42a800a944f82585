"""aiohttp (Debian's python3-aiohttp): two plain calls, a streamed one chunk by chunk (with aiohttp's
end-of-chunk flag, so the last, empty chunk shows), a tool call, a stream closed (r.close()) after its
first read; then the same over the Responses API and Anthropic's messages API (apis.py)."""
import asyncio
import os

import aiohttp
from apis import APIS

BASE, KEY = os.environ["LLM_BASE"], os.environ["OPENAI_API_KEY"]
H = {"Authorization": "Bearer " + KEY}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


async def main():
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        for text in ("hello", "again"):
            async with s.post(BASE + "/chat/completions", headers=H,
                              json={"model": "test-model", "messages": [{"role": "user", "content": text}], "temperature": 0}) as r:
                j = await r.json()
                print("plain:", j["choices"][0]["message"]["content"], "ce:", r.headers.get("Content-Encoding"))
        async with s.post(BASE + "/chat/completions", headers=H,
                          json={"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "stream please"}]}) as r:
            async for b, end in r.content.iter_chunks():
                print("read:", repr(b), end)
        async with s.post(BASE + "/chat/completions", headers=H,
                          json={"model": "test-model", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS}) as r:
            call = (await r.json())["choices"][0]["message"]["tool_calls"][0]["function"]
            print("tool:", call["name"], call["arguments"])
        async with s.post(BASE + "/chat/completions", headers=H, json={"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "close early"}]}) as r:
            b, end = await r.content.readchunk()
            print("early read:", repr(b), end)
            r.close()
        for a in APIS:
            async with s.post(a.url, headers=a.headers, json=a.plain) as r:
                print(a.name, "plain:", a.text(await r.json()))
            async with s.post(a.url, headers=a.headers, json=a.stream) as r:
                async for b, end in r.content.iter_chunks():
                    print(a.name, "read:", repr(b), end)
            async with s.post(a.url, headers=a.headers, json=a.tool) as r:
                print(a.name, "tool:", a.call(await r.json()))
            async with s.post(a.url, headers=a.headers, json=a.early) as r:
                b, end = await r.content.readchunk()
                print(a.name, "early read:", repr(b), end)
                r.close()
        print("closed early")

asyncio.run(main())
