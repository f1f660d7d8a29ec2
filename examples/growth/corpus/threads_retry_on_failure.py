"""A measurement client that starts one thread per HTTP input and never joins the ones that hang; when a thread cannot be started it logs the error, waits and retries, and at last gives up and exits normally.

Source: https://github.com/iclab/centinel/issues/278 (centinel #278, 2017)
Reporter's words: "We should keep retrying with a timeout + delay until a new thread can be made.
  client.py(line 341) ERROR: Error running baseline: can't start new thread"
Changes for this machine: the HTTP request is a wait that never ends (a server that does not
  answer, no timeout); 8 inputs per batch, a batch every 4 s; the retry the issue asked for
  (5 tries, 2 s apart), then it exits 0 as centinel's client does after a failed experiment.
Grows: threads (8 per batch, all hanging)
Dies of: pids 96: thread creation refused after ~45 s, retried, then exit status 0 (~60 s)
Prints: centinel's log lines, no counter
"""
import logging
import sys
import threading
import time

logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                    format="%(asctime)s client.py(line 341) %(levelname)s: %(message)s")
hang = threading.Event()


def get_request(url, results):
    hang.wait()  # a server that never answers, no timeout
    results[url] = None


def get_requests_batch(inputs, results):
    threads = []
    for url in inputs:
        thread = threading.Thread(target=get_request, args=(url, results), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(timeout=0.1)  # the batch moves on; hung threads stay


results = {}
batch = 0
failures = 0
while True:
    inputs = [f"http://example{batch}-{k}.invalid/" for k in range(8)]
    try:
        logging.info("Running baseline")
        get_requests_batch(inputs, results)
        batch += 1
        failures = 0
    except RuntimeError as exc:
        logging.error("Error running baseline: %s", exc)
        failures += 1
        if failures > 5:
            logging.info("Giving up on baseline")
            sys.stdout.flush()
            import os
            os._exit(0)
        time.sleep(2)
        continue
    time.sleep(4)
