"""Code that two worker processes of one test share, to work at the same time for sure.

Prepended to the workers' ``python -c`` scripts (they run outside the test package).
A barrier file releases them together; ``meet`` then keeps each from going past its
first step until the other has made one, so their working windows overlap by
construction, however a loaded machine schedules them.
"""

WORKER_RENDEZVOUS = r'''
import time
from pathlib import Path


def wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.005)


def meet(directory: Path, tag: str, name: str, other: str) -> None:
    (directory / f"{tag}-{name}").touch()
    wait_for(directory / f"{tag}-{other}")
'''
