"""A client that makes a new asyncio event loop and a thread to run it for each connect attempt, and stops the loop without closing it: 3 fds (epoll, the self-pipe socketpair) and a thread per attempt.

Source: https://github.com/aphyt/aphytcomm/issues/13 (aphytcomm #13, 2026)
Reporter's words: "NSeries leaks an event loop, 3 fds and a non-daemon thread per connect attempt
  ... In a long-running process that reconnects to a PLC, this exhausts the file descriptor limit."
Changes for this machine: the library's create_sync_entry/stop_loop as the reporter quoted them,
  without the PLC (nothing listens: each attempt fails); one attempt a second; the thread is a
  daemon so the script can end.
Grows: open files (3 per attempt: an epoll fd and a socketpair) and threads (1 per attempt)
Dies of: nofile 160 after ~50 s (OSError: [Errno 24] Too many open files)
Prints: "attempt N: fds M" as the reporter's repro did
"""
import asyncio
import os
import threading
import time


class AsyncNSeries:
    def start_loop(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def create_sync_entry(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.start_loop, daemon=True)
        self.thread.start()

    def stop_loop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        # self.thread.join()


def fds():
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


keep = []
attempt = 0
while True:
    attempt += 1
    client = AsyncNSeries()
    client.create_sync_entry()
    keep.append(client)  # the caller's retry loop holds its clients
    print(f"attempt {attempt}: fds {fds()}", flush=True)
    time.sleep(1.0)
