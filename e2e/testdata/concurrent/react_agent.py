"""A ReAct-style loop: the model is asked, its two tools run as child
processes in parallel threads (date, ls -la), and their output goes into
the next prompt."""
import json, os, subprocess, urllib.request
from concurrent.futures import ThreadPoolExecutor

BASE = os.environ["LLM_BASE"]


def ask(content):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request(BASE + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def tool(argv):
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return ask("observation: " + out)


plan = ask("what time is it, and what is here?")
with ThreadPoolExecutor(2) as ex:
    observations = list(ex.map(tool, [["date"], ["ls", "-la", "--full-time"]]))
print(ask("answer: " + plan + " | " + " | ".join(observations)))
