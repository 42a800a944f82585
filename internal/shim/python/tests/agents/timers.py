"""asyncio timer order and cost: timers of 0.3, 0.1, 0.1 and 2.0 s registered as
c, a, b, d; then more sleeps and timers for 5+ s of virtual time in all.
argv[1]: a factor for every duration (default 1)."""

import asyncio
import json
import sys
import time

import dal

S = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0

wall = dal.ORIG["perf_counter"]


async def main():
    loop = asyncio.get_running_loop()
    order = []

    async def timer(name, delay):
        await asyncio.sleep(delay)
        order.append(name)

    t0 = loop.time()
    await asyncio.gather(timer("c", 0.3 * S), timer("a", 0.1 * S), timer("b", 0.1 * S), timer("d", 2.0 * S))
    await asyncio.sleep(1.0 * S)
    try:
        await asyncio.wait_for(asyncio.sleep(60 * S), timeout=1.0 * S)
    except asyncio.TimeoutError:
        order.append("timeout")
    time.sleep(1.0 * S)  # a blocking sleep inside a coroutine advances the clock too
    return order, loop.time() - t0, type(loop).__name__


w0 = wall()
order, virtual, loop_type = asyncio.run(main())
print(json.dumps({"order": order, "virtual": virtual, "wall": wall() - w0, "loop": loop_type, "stats": dal.stats()}))
