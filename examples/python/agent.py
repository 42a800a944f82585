#!/usr/bin/env python3
"""A small agent that touches every clock and randomness source dal's Python
shim virtualizes. Under `dal-exec run` (strict mode) its output is identical
on every run with the same --seed; a new seed changes every random value and
no clock value.

    bin/dal-exec run --seed 7 -- python3 examples/python/agent.py

Without dal it runs too, on the real clock and real randomness (and slowly:
its 68 s of sleeps and timers are then real).
"""

import asyncio
import datetime
import os
import random
import secrets
import time
import uuid


def clock():
    print("time.time()          ", repr(time.time()))
    print("datetime.now()       ", datetime.datetime.now().isoformat())
    print("datetime.now(UTC)    ", datetime.datetime.now(datetime.timezone.utc).isoformat())
    print("date.today()         ", datetime.date.today().isoformat())
    print("time.monotonic()     ", repr(time.monotonic()))


def randomness():
    print("random.random()      ", repr(random.random()))
    print("random.randint(1,100)", random.randint(1, 100))
    print("random.choice        ", random.choice(["plan", "search", "answer", "ask"]))
    print("Random().random()    ", repr(random.Random().random()))
    print("uuid.uuid4()         ", uuid.uuid4())
    print("uuid.uuid1()         ", uuid.uuid1())
    print("os.urandom(8)        ", os.urandom(8).hex())
    print("secrets.token_hex(8) ", secrets.token_hex(8))


async def timers():
    order = []

    async def timer(name, delay):
        await asyncio.sleep(delay)
        order.append(name)

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    # registered c, a, b, d: fire by deadline, ties in registration order
    await asyncio.gather(timer("c", 0.3), timer("a", 0.1), timer("b", 0.1), timer("d", 2.0))
    try:
        await asyncio.wait_for(asyncio.sleep(3600), timeout=5)
    except asyncio.TimeoutError:
        order.append("timeout@5s")
    print("asyncio timer order  ", " ".join(order))
    print("asyncio elapsed      ", "%.3f s" % (loop.time() - t0))


def sleeps():
    t0 = time.monotonic()
    time.sleep(1.5)
    t1 = time.monotonic()
    print("time.sleep(1.5) took ", "%.3f s" % (t1 - t0))
    p0 = time.perf_counter()
    time.sleep(60)
    print("time.sleep(60) took  ", "%.3f s" % (time.perf_counter() - p0))
    print("time.time() after    ", repr(time.time()))


def main():
    try:
        import dal
        where = "dal mode %s, stream %s" % (dal.mode(), dal.stream())
    except ImportError:
        where = "not under dal"
    print("#", where)
    clock()
    randomness()
    asyncio.run(timers())
    sleeps()


if __name__ == "__main__":
    main()
