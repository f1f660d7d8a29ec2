"""A launcher that forks a child per request, the child starts the program and exits, and the parent never waits: one zombie per request. It logs each child's pid.

Source: https://github.com/ranger/ranger/pull/47 (ranger #47, 2012)
Reporter's words: "Call to Popen_forked leave a zombie of python process fork. Waiting for it to
  finish solve this problem."
Changes for this machine: the program run is `sleep 0`; one request every 1.5 s; the log line
  names the child's pid (as a service logs what it forked).
Grows: processes (zombies of the forked children), one per request
Dies of: pids 48 (os.fork fails with EAGAIN) after ~70 s
Prints: "forked child N" with the child's pid (a number that climbs, but is no counter)
"""
import os
import subprocess
import time


def Popen_forked(*args, **kwargs):
    """ranger's own helper, as it was before the fix: no waitpid."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        with open(os.devnull, "r") as null_r, open(os.devnull, "w") as null_w:
            kwargs["stdin"], kwargs["stdout"], kwargs["stderr"] = null_r, null_w, null_w
            subprocess.Popen(*args, **kwargs)
        os._exit(0)
    return pid


while True:
    child = Popen_forked(["sleep", "0"])
    print("forked child", child, flush=True)
    time.sleep(1.5)
