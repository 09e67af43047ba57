"""Processes that come and go: a work farm on :class:`gridcoll.group.Group`.

The founder owns ``--vnodes`` virtual nodes and, each round, broadcasts a block of
numbers from vnode 0. Every process sums, for each vnode it owns, the numbers at that
vnode's positions (``block[v::nvnodes]``) and contributes them to a reduction rooted
at vnode 0, so the founder gets the whole block's sum whoever owns what. Workers join
while it runs and one leaves halfway; the sums stay exact because every vnode gets
every broadcast once and counts once in each reduction (seed 004, sec. III, IV-D,
IV-E)::

    PYTHONPATH=src python examples/phoenix_group.py --workers 3 --rounds 6

Each worker is a separate OS process (``multiprocessing``, spawn) that knows only the
founder's address and the group's secret.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from collections.abc import Hashable
from typing import Any

import numpy as np

from gridcoll.group import Group


def _contribute(
    group: Group, nvnodes: int, op_id: Hashable, vnodes: frozenset[int], data: object
) -> None:
    """On delivery: this process's share of the round's sum, one value per vnode."""
    block = np.frombuffer(data, dtype=np.int64)  # type: ignore[arg-type]
    rnd = int(block[0])
    group.reduce({v: int(block[v::nvnodes].sum()) for v in vnodes}, "sum", 0, tag=rnd)


def worker(
    address: str, secret: bytes, nvnodes: int, leave_after: float | None, stopped: Any
) -> None:
    """Join, contribute to every round, leave after ``leave_after`` seconds (if given),
    stop when the founder sets ``stopped``. A joiner is given half of its contact's
    vnodes, so once the founder is down to one vnode, later joiners own none (and only
    forward) until a member leaves."""
    box: list[Group] = []

    def on_deliver(op_id: Hashable, vnodes: frozenset[int], data: object) -> None:
        if box:
            _contribute(box[0], nvnodes, op_id, vnodes, data)

    group = Group.join(address, secret, on_deliver=on_deliver)
    box.append(group)
    print(f"  worker {group.pid:x} joined")
    if leave_after is not None and not stopped.wait(leave_after):
        group.leave()
        print(f"  worker {group.pid:x} left")
        stopped.wait(2.0)  # keep forwarding stragglers a little while
    else:
        stopped.wait(300)
    group.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--vnodes", type=int, default=16)
    ap.add_argument("--size", type=int, default=200_000, help="numbers per block")
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    box: list[Group] = []

    def on_deliver(op_id: Hashable, vnodes: frozenset[int], data: object) -> None:
        if box:
            _contribute(box[0], args.vnodes, op_id, vnodes, data)

    procs: list[Any] = []
    stopped = ctx.Event()
    with Group.start(args.vnodes, on_deliver=on_deliver) as founder:
        box.append(founder)

        def spawn(leave_after: float | None = None) -> None:
            a = (founder.address, founder.secret, args.vnodes, leave_after, stopped)
            procs.append(ctx.Process(target=worker, args=a))
            procs[-1].start()

        for i in range(args.workers):
            spawn(leave_after=1.0 if i == 0 else None)
        founder.wait_until(lambda g: len(g.members) > args.workers, 30)
        rng = np.random.default_rng(0)
        for rnd in range(args.rounds):
            if rnd == args.rounds // 2:
                spawn()  # a newcomer halfway
            block = rng.integers(0, 1000, args.size, dtype=np.int64)
            block[0] = rnd
            founder.bcast(block, root=0)
            res = founder.result(("reduce", rnd), timeout=60)
            want = int(block.sum())
            verdict = "exact" if res.value == want else f"want {want}"
            print(
                f"round {rnd}: {len(founder.members)} members, founder owns "
                f"{len(founder.vnodes)} vnodes, sum {res.value} ({verdict})"
                + (f", missing vnodes {sorted(res.missing)}" if res.missing else "")
            )
            time.sleep(0.5)
        stopped.set()
        for proc in procs:
            proc.join(30)


if __name__ == "__main__":
    main()
