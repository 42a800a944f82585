"""A parent that starts a Python child (subprocess), a Node child, a forked
child and a posix_spawn child; every child prints its stream and clock."""

import json
import os
import subprocess
import sys
import time

import dal

PY_CHILD = "import dal, json, os, time, random; print(json.dumps({'kind': %r, 'stream': dal.stream(), 'env': os.environ.get('DAL_STREAM'), 'time': time.time(), 'random': random.random()}))"
NODE_CHILD = "console.log(JSON.stringify({kind: 'node', stream: process.env.DAL_STREAM, now: Date.now(), random: Math.random()}))"

lines = [json.dumps({"kind": "parent", "stream": dal.stream(), "time": time.time()})]
lines.append(subprocess.run([sys.executable, "-c", PY_CHILD % "subprocess"], capture_output=True, text=True, check=True).stdout.strip())
lines.append(subprocess.run(["node", "-e", NODE_CHILD], capture_output=True, text=True, check=True).stdout.strip())
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    import random
    os.write(w, json.dumps({"kind": "fork", "stream": dal.stream(), "env": os.environ.get("DAL_STREAM"), "time": time.time(), "random": random.random()}).encode())
    os._exit(0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
os.waitpid(pid, 0)
lines.append(data.decode())
r, w = os.pipe()
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", PY_CHILD % "posix_spawn"], dict(os.environ),
                     file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
os.close(w)
with os.fdopen(r) as f:
    lines.append(f.read().strip())
os.waitpid(pid, 0)
print("\n".join(lines))
