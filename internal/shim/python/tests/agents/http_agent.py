"""An agent that starts a local http.server in a thread and requests it, sync
and from asyncio (run_in_executor, open_connection) while a 30 s timeout
timer is pending. The server takes 100 ms of wall time per response."""

import asyncio
import http.server
import json
import threading
import urllib.request

import dal


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        dal.ORIG["sleep"](0.1)
        body = b"hello " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
url = "http://127.0.0.1:%d" % srv.server_address[1]
result = {"sync": urllib.request.urlopen(url + "/sync", timeout=10).read().decode()}


async def main():
    loop = asyncio.get_running_loop()
    fired = []
    timer = loop.call_later(30, fired.append, "30s-timeout")
    t0 = loop.time()
    body = await loop.run_in_executor(None, lambda: urllib.request.urlopen(url + "/executor", timeout=10).read())
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.server_address[1])
    writer.write(b"GET /stream HTTP/1.0\r\n\r\n")
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    result.update(executor=body.decode(), open_connection=raw.split(b"\r\n\r\n", 1)[1].decode(),
                  fired_before=list(fired), virtual=loop.time() - t0)
    timer.cancel()


asyncio.run(main())
srv.shutdown()
result["stats"] = dal.stats()
print(json.dumps(result))
