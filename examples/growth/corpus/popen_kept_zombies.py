"""A service that runs a helper with subprocess.Popen for each job and keeps the Popen objects, never waiting: each finished helper stays a zombie.

Source: https://github.com/crits/crits_services/issues/58 (crits_services #58, 2014)
Reporter's words: "the services using subprocess.Popen() (e.g. upx_service) leave behind zombie
  processes" (their ps listing: `[httpd] <defunct>` under each worker).
Changes for this machine: the helper is `true` instead of upx; one job every 1.5 s; the jobs'
  Popen objects are kept in the service's list (as the service's handles kept them alive).
Grows: processes (zombies), one per job
Dies of: pids 48 (fork fails: BlockingIOError, EAGAIN) after ~70 s
Prints: nothing per job
"""
import subprocess
import time

jobs = []
while True:
    proc = subprocess.Popen(["true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    proc.stderr.close()
    jobs.append(proc)  # the service keeps its handle; nobody calls wait()
    time.sleep(1.5)
