"""SharedMemory objects that go out of scope while their buffer is still exported: __del__ fails ("cannot close exported pointers exist") and the fd to /dev/shm stays open, with its mapping.

Source: https://github.com/python/cpython/issues/155003 (cpython #155003, 2026)
Reporter's words: "When a SharedMemory object goes out of scope ... This can break if there is
  still a buffer exported from its mmap instance ... it will leave the file descriptor open"
Changes for this machine: the reporter's shview() in a loop that keeps each view (as a caller
  that keeps the arrays); 2 views a second.
Grows: open files (/dev/shm/psm_*, one per view) and memory maps
Dies of: nofile 192 after ~90 s (OSError: [Errno 24] Too many open files)
Prints: "fd is: N" per view, as the reporter's did (a number that climbs by one)
"""
import time
from multiprocessing.shared_memory import SharedMemory


def shview(size=4096):
    shmem = SharedMemory(create=True, size=size)
    print("fd is:", shmem._fd, flush=True)
    return shmem.buf.cast('i')


views = []
while True:
    views.append(shview())
    time.sleep(0.5)
