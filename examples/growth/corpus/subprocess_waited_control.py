"""Control: i3pystatus #422's fix: the helper run with synchronous communication, so each child is reaped at once; processes stay flat.

Source: https://github.com/enkore/i3pystatus/pull/422 (i3pystatus #422, 2016)
Reporter's words: "subprocess.Popen() does not implicitly wait() on the child process ... Use
  synchronous subprocess communication to collect child process return codes immediately"
Changes for this machine: `true` for pactl; a call every 0.5 s; runs --seconds (75).
Grows: nothing (one short-lived child at a time)
Limit: pids 48 (never reached)
Prints: nothing
"""
import subprocess
import sys
import time

seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 75
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    out, _ = subprocess.Popen(["true"], stdout=subprocess.PIPE).communicate()
    time.sleep(0.5)
