"""e2e/testdata/llm_server.py with TCP_NODELAY on its connections, as
production HTTP servers set it. Python's http.server leaves Nagle's
algorithm on: a reply written as headers then body waits for the client's
delayed ACK (up to 40 ms) on a kept-alive connection such as dal's proxy
keeps upstream. The replay benchmark runs against both."""
import os
import runpy
import socketserver
import sys

socketserver.StreamRequestHandler.disable_nagle_algorithm = True
server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e", "testdata", "llm_server.py")
sys.argv = [server] + sys.argv[1:]
runpy.run_path(server, run_name="__main__")
