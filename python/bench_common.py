"""What the Python benchmarks share (not a test): the busy Python thread
an engine's scheduler stands for. Standard library only, so that the
Mooncake worker (another interpreter) imports it too."""

import threading
import time


class Busy(threading.Thread):
    """A pure-Python loop, the GIL held: how far it gets shows what the
    measured call leaves of the GIL (loops), and what it spent (cpu, its
    own thread's CPU seconds, which a measurement subtracts from the
    process's)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.loops = 0
        self.cpu = 0.0

    def run(self):
        t0 = time.thread_time()
        while not self.stop.is_set():
            self.loops += _spin(1000)
            self.cpu = time.thread_time() - t0


def _spin(k: int) -> int:
    """k iterations of Python bytecode (the GIL held)."""
    x = 0
    for _ in range(k):
        x += 1
    return x
