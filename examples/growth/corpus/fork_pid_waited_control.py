"""Control: ranger #47's fix: the forked child is waited for. The parent still logs each child's pid: a number that climbs (by more than one, and by others' processes too) but counts nothing.

Source: https://github.com/ranger/ranger/pull/47 (ranger #47, 2012: the merged fix)
Reporter's words: "Waiting for it to finish solve this problem."
Changes for this machine: `sleep 0` as the program; a request every 0.7 s; runs --seconds (75).
Grows: nothing
Limit: pids 48 (never reached)
Prints: "forked child N" with the child's pid
"""
import os
import subprocess
import sys
import time


def Popen_forked(*args, **kwargs):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        with open(os.devnull, "r") as null_r, open(os.devnull, "w") as null_w:
            kwargs["stdin"], kwargs["stdout"], kwargs["stderr"] = null_r, null_w, null_w
            subprocess.Popen(*args, **kwargs)
        os._exit(0)
    os.waitpid(pid, 0)  # the fix
    return pid


seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 75
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    child = Popen_forked(["sleep", "0"])
    print("forked child", child, flush=True)
    time.sleep(0.7)
