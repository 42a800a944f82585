"""An agent making N chat completions (argv[1], default 100) against an
OpenAI-compatible API with urllib, which honours HTTP(S)_PROXY: every third
call streamed (SSE), the rest plain; each prompt carries a piece of the
previous answer, as a conversation does. The replay-vs-record benchmark."""
import json
import os
import sys
import urllib.request

BASE = os.environ["LLM_BASE"]
KEY = os.environ["OPENAI_API_KEY"]


def post(body):
    req = urllib.request.Request(BASE + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=30)


def plain(text):
    with post({"model": "test-model", "temperature": 0, "messages": [{"role": "user", "content": text}]}) as r:
        return json.load(r)["choices"][0]["message"]["content"]


def streamed(text):
    out, chunks = "", 0
    with post({"model": "test-model", "stream": True, "messages": [{"role": "user", "content": text}]}) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunks += 1
            for c in json.loads(line[6:])["choices"]:
                out += c["delta"].get("content", "")
    return out, chunks


n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
last, chars, chunks = "start", 0, 0
for i in range(n):
    prompt = "turn %d after %s" % (i, last.split(" ")[1] if " " in last else last)
    if i % 3 == 2:
        last, c = streamed(prompt)
        chunks += c
    else:
        last = plain(prompt)
    chars += len(last)
print("calls %d chars %d stream chunks %d last %r" % (n, chars, chunks, last))
