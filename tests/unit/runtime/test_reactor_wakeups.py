"""The reactor's wake-ups: ``call_soon`` writes to the wake-up pipe only while the loop sleeps.

Aspects: callbacks added from other threads all run, whether they arrive while the loop sleeps
or while it is busy with earlier ones (those it finds before it sleeps again, with no byte in
the pipe); a callback added from the loop's own thread runs, and writes no wake-up byte.
"""

import threading

from mesh_client._src.runtime import reactor


def test_callbacks_from_other_threads_all_run_whenever_they_come():
    loop = reactor.Reactor("test-wakeups")
    count = 2000
    done = threading.Semaphore(0)
    slow = threading.Event()

    def busy():  # keeps the loop awake while the producers below add more
        slow.wait(0.001)
        done.release()

    def produce(n):
        for i in range(n):
            loop.call_soon(busy if i % 50 == 0 else done.release)

    producers = [threading.Thread(target=produce, args=(count // 4,)) for _ in range(4)]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    for _ in range(count):
        assert done.acquire(timeout=30), "a callback added while the loop was awake never ran"


class CountingPipe:
    """The wake-up pipe's writing end, counting what is written to it."""

    def __init__(self, sock):
        self.sock = sock
        self.sent = []

    def send(self, data):
        self.sent.append(data)
        return self.sock.send(data)


def test_a_callback_added_on_the_loop_thread_runs_without_a_wake_up_byte():
    loop = reactor.Reactor("test-wakeups")
    ran = threading.Event()
    pipe = CountingPipe(loop._wake_w)

    def on_loop():
        loop._wake_w = pipe  # from here on, count the bytes
        loop.call_soon(ran.set)  # the loop is awake: no byte needed

    loop.call_soon(on_loop)
    assert ran.wait(30)
    assert pipe.sent == []
