"""The agent dal-exec show's tests record: two LLM calls (one streamed) whose
prompt, and everything else it leaves (stdout, stderr, file names, notes),
holds markup that must stay text in the page. LLM_BASE and OPENAI_API_KEY
come from the kept environment; argv[1] is a variant ("a" or "b") so two
recordings differ a little."""
import json
import os
import subprocess
import sys
import urllib.request

import dal

HOSTILE = "</script><img src=x onerror=alert(1)>"
BASE = os.environ["LLM_BASE"]
KEY = os.environ["OPENAI_API_KEY"]
VARIANT = sys.argv[1] if len(sys.argv) > 1 else "a"


def post(body):
    req = urllib.request.Request(BASE + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=30)


with post({"model": "test-model", "temperature": 0, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi " + HOSTILE + (" again" if VARIANT == "b" else "")}]}) as r:
    print(json.load(r)["choices"][0]["message"]["content"])
with post({"model": "test-model", "stream": True, "stream_options": {"include_usage": True},
           "messages": [{"role": "user", "content": "stream please"}]}) as r:
    text = ""
    for line in r:
        line = line.decode().strip()
        if line.startswith("data: {"):
            for c in json.loads(line[6:])["choices"]:
                text += c["delta"].get("content", "")
print("streamed:", text)

with open("out.txt", "w") as f:
    f.write("draft 1\n")
dal.iteration(score=0.4, artifacts=["out.txt"], note="first " + HOSTILE)
with open("out.txt", "w") as f:
    f.write("draft 2\n" if VARIANT == "a" else "draft 2b\n")
dal.iteration(score=0.9, artifacts=["out.txt"], note="second")
dal.checkpoint("phase-1", artifacts=["out.txt"], note=HOSTILE)

with open("input.txt", "a") as f:
    f.write("gamma\n")
os.remove("obsolete.txt")
os.mkdir("x<")
with open("x" + HOSTILE.replace("(1)", "(2)") + ".txt", "w") as f:
    f.write("planted\n")
with open("blob.bin", "wb") as f:
    f.write(bytes(range(256)))
os.symlink("/etc/passwd", "passwd-link")
subprocess.run(["sh", "-c", "echo child"])
with open("note.txt") as f:
    print(f.read().strip())
print("err " + HOSTILE, file=sys.stderr)
