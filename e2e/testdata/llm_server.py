"""A local OpenAI-compatible test server for dal's end-to-end tests.

POST /v1/chat/completions, plain and streamed (SSE, every event flushed as
its own HTTP chunk), with usage, and a tool call when the request offers
tools; POST /v1/responses, OpenAI's Responses API, alike (streamed as
typed events, response.output_text.delta and so on); POST /v1/messages,
Anthropic's messages API, alike. A streamed request whose last message is
"close early" gets the events up to its first text delta and then a
stream held open until the client goes, as a model still generating
(chat completions: 1 event; Responses: 5; messages: 3). Every reply is
numbered so identical requests get different answers. Requires
"Authorization: Bearer <key>" or "x-api-key: <key>" (the key is
--key-value) and sets a session cookie. --cert/--key serve HTTPS; --gzip
compresses plain JSON replies for clients that accept gzip. Prints the
port on stdout once listening; logs one line per request to stderr.
"""
import argparse
import gzip
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNT = {"n": 0}
LOCK = threading.Lock()


def next_n():
    with LOCK:
        COUNT["n"] += 1
        return COUNT["n"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("request %s %s\n" % (self.command, self.path))
        sys.stderr.flush()

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if ARGS.gzip and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            body = gzip.compress(body, mtime=0)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "session=%s; Path=/; HttpOnly" % ARGS.cookie)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
        self._json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.headers.get("Authorization") != "Bearer " + ARGS.key_value and self.headers.get("x-api-key") != ARGS.key_value:
            return self._json(401, {"error": {"message": "bad key"}})
        if self.path == "/v1/messages":
            return self._messages(json.loads(raw))
        if self.path == "/v1/responses":
            return self._responses(json.loads(raw))
        if self.path != "/v1/chat/completions":
            return self._json(404, {"error": {"message": "not found"}})
        req = json.loads(raw)
        n = next_n()
        last = req["messages"][-1]["content"]
        text = "reply %d to: %s" % (n, last)
        usage = {"prompt_tokens": 5 + len(last.split()), "completion_tokens": len(text.split()),
                 "total_tokens": 5 + len(last.split()) + len(text.split())}
        if req.get("tools") and not req.get("stream"):
            name = req["tools"][0]["function"]["name"]
            call = {"id": "call_%d" % n, "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"city": "Paris", "n": n})}}
            return self._json(200, {
                "id": "chatcmpl-%d" % n, "object": "chat.completion", "created": 1767225600,
                "model": req.get("model", "test-model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                             "finish_reason": "tool_calls"}],
                "usage": usage})
        if not req.get("stream"):
            return self._json(200, {
                "id": "chatcmpl-%d" % n, "object": "chat.completion", "created": 1767225600,
                "model": req.get("model", "test-model"), "system_fingerprint": "fp_test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Set-Cookie", "session=%s; Path=/" % ARGS.cookie)
        self.end_headers()
        words = text.split(" ")
        events = []
        for i, w in enumerate(words):
            delta = {"content": (w if i == 0 else " " + w)}
            if i == 0:
                delta["role"] = "assistant"
            events.append({"id": "chatcmpl-%d" % n, "object": "chat.completion.chunk", "created": 1767225600,
                           "model": req.get("model", "test-model"), "system_fingerprint": "fp_test",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        events.append({"id": "chatcmpl-%d" % n, "object": "chat.completion.chunk", "created": 1767225600,
                       "model": req.get("model", "test-model"), "system_fingerprint": "fp_test",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (req.get("stream_options") or {}).get("include_usage"):
            events.append({"id": "chatcmpl-%d" % n, "object": "chat.completion.chunk", "created": 1767225600,
                           "model": req.get("model", "test-model"), "choices": [], "usage": usage})
        frames = ["data: %s\n\n" % json.dumps(e) for e in events] + ["data: [DONE]\n\n"]
        if last == "close early":
            frames = frames[:1]
        for f in frames:
            b = f.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()
        if last == "close early":
            return self._hold()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _events(self, events):
        """Sends (name, data) server-sent events, each its own HTTP chunk."""
        for name, data in events:
            b = ("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()

    def _hold(self):
        """A model still generating: nothing more until the client goes."""
        try:
            while self.connection.recv(1):
                pass
        except OSError:
            pass
        self.close_connection = True

    def _responses(self, req):
        """OpenAI's Responses API: plain, a function call, or streamed."""
        n = next_n()
        last = req["input"]
        if not isinstance(last, str):
            last = last[-1]["content"]
            if not isinstance(last, str):
                last = " ".join(p.get("text", "") for p in last)
        text = "reply %d to: %s" % (n, last)
        model = req.get("model", "test-model")
        usage = {"input_tokens": 5 + len(last.split()), "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": len(text.split()), "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 5 + len(last.split()) + len(text.split())}
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        item = {"type": "message", "id": "msg_%d" % n, "status": "completed", "role": "assistant", "content": [part]}
        if req.get("tools") and not req.get("stream"):
            item = {"type": "function_call", "id": "fc_%d" % n, "call_id": "call_%d" % n, "name": req["tools"][0]["name"],
                    "arguments": json.dumps({"city": "Paris", "n": n}), "status": "completed"}
        resp = {"id": "resp_%d" % n, "object": "response", "created_at": 1767225600, "status": "completed",
                "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None,
                "model": model, "output": [item], "parallel_tool_calls": True, "previous_response_id": None,
                "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": 1.0,
                "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": req.get("tools") or [],
                "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": None, "metadata": {}}
        if not req.get("stream"):
            return self._json(200, resp)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        start = dict(resp, status="in_progress", output=[], usage=None)
        ids = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        events = [("response.created", {"response": start}), ("response.in_progress", {"response": start}),
                  ("response.output_item.added", {"output_index": 0, "item": dict(item, status="in_progress", content=[])}),
                  ("response.content_part.added", dict(ids, part=dict(part, text="")))]
        words = text.split(" ")
        for i, w in enumerate(words):
            events.append(("response.output_text.delta", dict(ids, delta=w if i == 0 else " " + w, logprobs=[])))
            if last == "close early":
                break
        else:
            events += [("response.output_text.done", dict(ids, text=text, logprobs=[])),
                       ("response.content_part.done", dict(ids, part=part)),
                       ("response.output_item.done", {"output_index": 0, "item": item}),
                       ("response.completed", {"response": resp})]
        self._events([(name, dict({"type": name, "sequence_number": i}, **data)) for i, (name, data) in enumerate(events)])
        if last == "close early":
            return self._hold()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _messages(self, req):
        """Anthropic's messages API: plain, a tool use, or streamed."""
        n = next_n()
        last = req["messages"][-1]["content"]
        if not isinstance(last, str):
            last = " ".join(b.get("text", "") for b in last)
        text = "reply %d to: %s" % (n, last)
        model = req.get("model", "test-model")
        usage = {"input_tokens": 5 + len(last.split()), "output_tokens": len(text.split())}
        if not req.get("stream"):
            content, stop = [{"type": "text", "text": text}], "end_turn"
            if req.get("tools"):
                content = [{"type": "tool_use", "id": "toolu_%d" % n, "name": req["tools"][0]["name"],
                            "input": {"city": "Paris", "n": n}}]
                stop = "tool_use"
            return self._json(200, {"id": "msg_%d" % n, "type": "message", "role": "assistant", "model": model,
                                    "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        msg = {"id": "msg_%d" % n, "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
        events = [("message_start", {"type": "message_start", "message": msg}),
                  ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
        for i, w in enumerate(text.split(" ")):
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": w if i == 0 else " " + w}}))
            if last == "close early":
                self._events(events)
                return self._hold()
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                      "usage": {"output_tokens": usage["output_tokens"]}}),
                   ("message_stop", {"type": "message_stop"})]
        self._events(events)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--key-value", default="sk-test")
    p.add_argument("--cookie", default="c00kie")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--gzip", action="store_true")
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    if ARGS.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
