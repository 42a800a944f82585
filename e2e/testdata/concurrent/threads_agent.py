"""Four tool calls on a ThreadPoolExecutor, each an LLM call with urllib;
each thread, once answered, reads the clock and draws a random number."""
import datetime, json, os, random, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

BASE = os.environ["LLM_BASE"]


def call(i):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"tool {i}"}]}).encode()
    req = urllib.request.Request(BASE + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        out = json.loads(r.read())["choices"][0]["message"]["content"]
    return f"{i} {out} t={time.time():.6f} r={random.random():.6f} d={datetime.datetime.now().isoformat()}"


with ThreadPoolExecutor(4) as ex:
    for line in ex.map(call, range(4)):
        print(line)
