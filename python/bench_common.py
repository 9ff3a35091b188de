"""What the Python benchmarks share (not a test): the busy Python thread
an engine's scheduler stands for, and the timing of a call beside it.
Standard library only, so that the Mooncake worker (another interpreter)
imports it too."""

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


def beside(fn, busy: bool, settle: float = 0.2):
    """Runs fn once, with a Busy thread beside it when busy (started settle
    seconds before fn, stopped after). Returns wall seconds, the process's
    CPU seconds less the busy thread's own, and the busy thread's loops per
    second (0 without one)."""
    th = Busy() if busy else None
    if th:
        th.start()
        time.sleep(settle)
    c0, l0 = (th.cpu, th.loops) if th else (0.0, 0)
    p0, w0 = time.process_time(), time.perf_counter()
    fn()
    p1, w1 = time.process_time(), time.perf_counter()
    bcpu, loops = (th.cpu - c0, th.loops - l0) if th else (0.0, 0)
    if th:
        th.stop.set()
        th.join()
    wall = w1 - w0
    return wall, (p1 - p0) - bcpu, loops / max(wall, 1e-9)


def alone(settle: float, span: float) -> float:
    """The loops per second of a Busy thread by itself: left settle seconds
    to start, then counted over span seconds."""
    th = Busy()
    th.start()
    time.sleep(settle)
    l0, w0 = th.loops, time.perf_counter()
    time.sleep(span)
    rate = (th.loops - l0) / (time.perf_counter() - w0)
    th.stop.set()
    th.join()
    return rate
