"""A server that opens its message log once more for each new user connection and never closes it: the same log file open N times, one more every 2 s.

Source: https://github.com/liftoff/GateOne/issues/355 (GateOne #355, 2013)
Reporter's words: "we had way too many file descriptors in use by GateOne ... mostly multiple
  handles to the same log files ... The number of descriptors in use would grow each time a new
  user connected and then never get released."
Changes for this machine: a connection every 2 s (no web socket); go_logger opens the log with
  logging.FileHandler as golog.py did; the loggers are kept by the connections.
Grows: open files (gateone.log, once per connection), slowly
Dies of: nofile 48 after ~80 s (OSError: [Errno 24] Too many open files)
Prints: nothing
"""
import logging
import time


def go_logger(name, **metadata):
    logger = logging.getLogger(f"{name}.{metadata['session']}")
    handler = logging.FileHandler("gateone.log")
    logger.addHandler(handler)
    return logger


connections = []
session = 0
while True:
    session += 1
    msg_log = go_logger("gateone.message", session=session)
    msg_log.warning("user connected")
    connections.append(msg_log)
    time.sleep(2)
