# port0 prints the ports binds to port 0 get: TCP and UDP, IPv4 and IPv6,
# in this process and in a child.
import socket
import subprocess
import sys


def probe(who):
    for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(fam, kind)
            s.bind((host, 0))
            print(who, fam.name, kind.name, s.getsockname()[1])
    # A port given explicitly is the caller's.
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("127.0.0.1", port))
    print(who, "explicit", t.getsockname()[1] == port)


probe(sys.argv[1] if len(sys.argv) > 1 else "parent")
if len(sys.argv) == 1:
    sys.stdout.flush()
    subprocess.run([sys.executable, __file__, "child"], check=True)
