"""A Python agent with a 4-thread pool doing I/O: 400 HTTP requests to a
local server in a child process (a fresh connection each, as urllib makes
them) and a file written and read back per response. Prints a digest of
what it fetched and wrote. argv[1]: the number of requests (default 400)."""
import concurrent.futures as cf
import hashlib
import os
import subprocess
import sys
import urllib.request

SERVER = r'''
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (self.path * 512)[:4096].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
'''

n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline())
os.makedirs("out", exist_ok=True)


def fetch(k):
    with urllib.request.urlopen("http://127.0.0.1:%d/item/%d" % (port, k), timeout=30) as r:
        body = r.read()
    path = os.path.join("out", "%d.txt" % k)
    with open(path, "wb") as f:
        f.write(body)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


try:
    with cf.ThreadPoolExecutor(4) as pool:
        digests = list(pool.map(fetch, range(n)))
finally:
    server.terminate()
    server.wait()
print(n, hashlib.sha256("".join(digests).encode()).hexdigest())
