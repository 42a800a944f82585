"""asyncio.gather over four LLM calls, with httpx or aiohttp (argv[1]);
each, once answered, reads the clock and draws a random number."""
import asyncio, json, os, random, sys, time

BASE = os.environ["LLM_BASE"]


def body(i):
    return {"model": "m", "messages": [{"role": "user", "content": f"tool {i}"}]}


async def with_httpx():
    import httpx
    async with httpx.AsyncClient(timeout=30) as c:
        async def call(i):
            r = await c.post(BASE + "/chat/completions", json=body(i))
            return f"{i} {r.json()['choices'][0]['message']['content']} t={time.time():.6f} r={random.random():.6f}"
        return await asyncio.gather(*(call(i) for i in range(4)))


async def with_aiohttp():
    import aiohttp
    async with aiohttp.ClientSession(trust_env=True) as s:
        async def call(i):
            async with s.post(BASE + "/chat/completions", json=body(i)) as r:
                j = await r.json()
            return f"{i} {j['choices'][0]['message']['content']} t={time.time():.6f} r={random.random():.6f}"
        return await asyncio.gather(*(call(i) for i in range(4)))


done = []
async def main():
    run = with_httpx if sys.argv[1] == "httpx" else with_aiohttp
    for line in await run():
        done.append(line)
asyncio.run(main())
print("\n".join(done))
