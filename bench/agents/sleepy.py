"""A sleep-heavy agent: 5 s of virtual time in time.sleep and asyncio timers."""
import asyncio
import time

start = time.monotonic()
time.sleep(1.5)


async def main():
    await asyncio.gather(asyncio.sleep(2.0), asyncio.sleep(1.0))
    await asyncio.wait_for(asyncio.sleep(1.5), timeout=10)


asyncio.run(main())
print(f"virtual elapsed {time.monotonic() - start:.3f} s")
