"""An agent making N chat completions at once (argv[1], default 4) on a
ThreadPoolExecutor with urllib, which honours HTTP(S)_PROXY, as a framework
runs parallel tool calls. The overlap benchmark: against a server that
answers after 50 ms, N calls that overlap take about 50 ms, not N x 50.
It prints a line before the calls and one after, flushed at once: the
benchmark times the batch by when they reach it (the agent's own clock is
dal's virtual one)."""
import json
import os
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BASE = os.environ["LLM_BASE"]
KEY = os.environ["OPENAI_API_KEY"]


def call(i):
    body = {"model": "test-model", "temperature": 0, "seed": 1, "messages": [{"role": "user", "content": "tool %d" % i}]}
    req = urllib.request.Request(BASE + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["choices"][0]["message"]["content"]


n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
print("start", flush=True)
with ThreadPoolExecutor(max_workers=n) as pool:
    answers = list(pool.map(call, range(n)))
print("calls %d %s" % (n, " | ".join(answers)), flush=True)
