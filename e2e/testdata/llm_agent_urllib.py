"""An agent calling an OpenAI-compatible API with urllib (it honours
HTTP(S)_PROXY): one plain completion, one streamed, the same request three
times."""
import json
import os
import urllib.request

BASE = os.environ["LLM_BASE"]
KEY = os.environ["OPENAI_API_KEY"]


def post(body, stream=False):
    req = urllib.request.Request(BASE + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=30)


def ask(text):
    with post({"model": "test-model", "messages": [{"role": "user", "content": text}], "temperature": 0}) as r:
        out = json.load(r)
    return out["choices"][0]["message"]["content"]


print("plain:", ask(os.environ.get("PROMPT", "hello")))
with post({"model": "test-model", "stream": True, "stream_options": {"include_usage": True},
           "messages": [{"role": "user", "content": "stream please"}]}) as r:
    chunks, text = 0, ""
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunks += 1
        ev = json.loads(line[6:])
        for c in ev["choices"]:
            text += c["delta"].get("content", "")
print("stream:", text, "chunks:", chunks)
for i in range(3):
    print("again %d:" % i, ask("same"))
