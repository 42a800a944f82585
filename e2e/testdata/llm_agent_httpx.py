"""The same agent with httpx (Debian's python3-httpx; trust_env honours
HTTP(S)_PROXY and SSL_CERT_FILE)."""
import json
import os

import httpx

BASE = os.environ["LLM_BASE"]
HEADERS = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}

with httpx.Client(timeout=30) as client:
    def ask(text):
        r = client.post(BASE + "/chat/completions", headers=HEADERS,
                        json={"model": "test-model", "messages": [{"role": "user", "content": text}]})
        r.raise_for_status()
        return r.json()["choices"][0]["message"]["content"]

    print("plain:", ask("hello"))
    body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "stream please"}]}
    chunks, text = 0, ""
    with client.stream("POST", BASE + "/chat/completions", headers=HEADERS, json=body) as r:
        for line in r.iter_lines():
            line = line.strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunks += 1
            for c in json.loads(line[6:])["choices"]:
                text += c["delta"].get("content", "")
    print("stream:", text, "chunks:", chunks)
    for i in range(3):
        print("again %d:" % i, ask("same"))
