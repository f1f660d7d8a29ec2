"""A billiard (Celery's multiprocessing) Pool made, closed and joined per iteration: 4 pipes stay open each time.

Source: https://github.com/celery/billiard/issues/282 (billiard #282, 2019)
Reporter's words: "When joining, it closes pipes for each of the process but not 4 for _inqueue
  and _outqueue. Those become open forever till the MAIN process is closed."
Changes for this machine: the reporter's 10 iterations become 10000; a flush on the print.
  Otherwise the reporter's script (billiard 4.3.2, installed with pip for this corpus).
Grows: open files (~3.7 per second, 4 per printed line (one pool, ~1 s) here)
Dies of: nofile 256 after ~66 s here ("OSError: [Errno 24] Too many open files")
Prints: "Open connections: N" once per pool
"""
import billiard as mp
import os

def f(a):
    return a + 1


if __name__ == '__main__':
    pid = os.getpid()
    get_number_of_conns = os.popen(f'ls -l /proc/{pid}/fd | wc -l').read()
    print(f'At the beginning we only have {get_number_of_conns.strip()} connections')
    for i in range(10000):
        # creating a pool
        pool = mp.Pool(mp.cpu_count() - 1)
        # running a job
        result = pool.map(f, range(5))
        # closing the pool and joining
        pool.close()
        pool.join()
        # getting number of open connections
        get_number_of_conns = os.popen(f'ls -l /proc/{pid}/fd | wc -l').read()
        print(f'Open connections: {get_number_of_conns.strip()}', flush=True)
