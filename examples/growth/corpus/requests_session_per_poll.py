"""A device poller that makes a requests.Session per request and never closes it: each keeps its keep-alive socket to the device open.

Source: https://github.com/dlarrick/pykumo/issues/22 (pykumo #22, 2022)
Reporter's words: "requests.session left open in PyKumo._request causing resource warning ...
  ResourceWarning: unclosed <socket.socket ... raddr=('192.168.86.236', 80)>"
Changes for this machine: the device is a local keep-alive HTTP server in a child process
  (127.0.0.1); one poll every 0.5 s; the session is kept by the poller's object as in pykumo.
Grows: open files (sockets to 127.0.0.1:PORT, one per poll; the server holds the other ends)
Dies of: nofile 128 after ~60 s (OSError: [Errno 24] Too many open files)
Prints: the status of each poll ("200")
"""
import os
import selectors
import socket
import time

import requests


def device(listener):
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    body = b'{"status": "ok"}'
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
             + str(len(body)).encode() + b"\r\n\r\n" + body)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                sel.register(conn, selectors.EVENT_READ)
            else:
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                elif b"\r\n\r\n" in data:
                    key.fileobj.sendall(reply)


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(512)
port = listener.getsockname()[1]
if os.fork() == 0:
    device(listener)
listener.close()


class PyKumo:
    def __init__(self):
        self.sessions = []

    def _request(self, query):
        session = requests.Session()
        self.sessions.append(session)
        response = session.post(f"http://127.0.0.1:{port}/api", json=query, timeout=5)
        return response


kumo = PyKumo()
while True:
    r = kumo._request({"c": {"indoorUnit": {"status": {}}}})
    print(r.status_code)
    time.sleep(0.5)
