"""setup_logger(path) called for each task: a new logging.FileHandler on the same log file each time, never removed: the log file is open once more per task.

Source: https://github.com/wandb/wandb/issues/7124 (wandb #7124, 2024; also chanzuckerberg/miniwdl #301)
Reporter's words: "[OSError: [Errno 24] Too many open files] when using sweep" with their
  setup_logger('./testlog.log') called per run; "I've also tried removeHandler(...) method, and
  the problem's solved".
Changes for this machine: the sweep's runs are a loop of tasks, one every 0.6 s.
Grows: open files (testlog.log, once per task)
Dies of: nofile 96 after ~50 s (OSError: [Errno 24] Too many open files)
Prints: nothing (it logs to the file)
"""
import logging
import time


def setup_logger(save_path):
    logger = logging.getLogger(__name__)
    logger.setLevel(logging.INFO)

    file_handler = logging.FileHandler(filename=save_path, mode='w')
    formatter = logging.Formatter('%(asctime)s - %(name)s - %(levelname)s - %(message)s')
    file_handler.setFormatter(formatter)
    logger.addHandler(file_handler)

    logger.info("test log message")


while True:
    setup_logger('./testlog.log')
    time.sleep(0.6)
