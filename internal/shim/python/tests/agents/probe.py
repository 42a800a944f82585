"""Prints every virtualized clock and random value as JSON: {"clock": ..., "random": ...}."""

import datetime
import json
import os
import random
import secrets
import time
import uuid

import dal

clock = {
    "time": time.time(),
    "datetime_now": datetime.datetime.now().isoformat(),
    "time_ns": time.time_ns(),
    "monotonic": time.monotonic(),
    "perf_counter_ns": time.perf_counter_ns(),
    "utcnow": datetime.datetime.utcnow().isoformat(),
    "now_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    "today": datetime.date.today().isoformat(),
    "clock_gettime": time.clock_gettime(time.CLOCK_REALTIME),
    "ctime": time.ctime(),
}
t0 = time.monotonic()
time.sleep(1.5)
clock["sleep_1_5"] = time.monotonic() - t0
rnd = {
    "random": random.random(),
    "randint": random.randint(1, 10**9),
    "choice": random.choice(list(range(1000))),
    "gauss": random.gauss(0, 1),
    "instance": random.Random().random(),
    "sysrandom": random.SystemRandom().random(),
    "uuid4": str(uuid.uuid4()),
    "uuid1": str(uuid.uuid1()),
    "urandom": os.urandom(16).hex(),
    "token_hex": secrets.token_hex(16),
    "token_urlsafe": secrets.token_urlsafe(16),
    "randbelow": secrets.randbelow(10**12),
}
print(json.dumps({"mode": dal.mode(), "stream": dal.stream(), "clock": clock, "random": rnd, "stats": dal.stats()}, sort_keys=True))
