"""The JSON form of a schedule.

``{"format": "gridcoll-schedule/1", "op", "algorithm", "nranks", "root", "nbytes",
"params", "segments": [[offset, length], ...], "programs": [[op, ...], ...]}`` where an
op is ``["send", peer, [segments]]`` or ``["recv", peer, [segments]]`` (a fourth
element ``true`` marks a combining receive, a fifth ``true`` one whose incoming data is
the left operand: :attr:`Recv.incoming_first`).
"""

from __future__ import annotations

import json
from typing import Any

from gridcoll.errors import ScheduleError
from gridcoll.schedule.ir import Recv, Schedule, Send

__all__ = ["FORMAT", "schedule_from_json", "schedule_to_json"]

FORMAT = "gridcoll-schedule/1"


def _op_to_list(op: Send | Recv) -> list[Any]:
    if isinstance(op, Send):
        return ["send", op.peer, list(op.segments)]
    out: list[Any] = ["recv", op.peer, list(op.segments)]
    if op.combine:
        out.append(True)
        if op.incoming_first:
            out.append(True)
    return out


def schedule_to_json(schedule: Schedule, indent: int | None = None) -> str:
    """Serialise ``schedule`` to a JSON string."""
    data = {
        "format": FORMAT,
        "op": schedule.op,
        "algorithm": schedule.algorithm,
        "nranks": schedule.nranks,
        "root": schedule.root,
        "nbytes": schedule.nbytes,
        "params": dict(schedule.params),
        "segments": [list(s) for s in schedule.segments],
        "programs": [[_op_to_list(op) for op in program] for program in schedule.programs],
    }
    return json.dumps(data, indent=indent)


def schedule_from_json(text: str) -> Schedule:
    """Parse the JSON form back into a :class:`Schedule` equal to the original."""
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise ScheduleError(f"not a schedule: format is {data.get('format')!r}")
        programs = []
        for program in data["programs"]:
            ops: list[Send | Recv] = []
            for kind, peer, segments, *rest in program:
                if kind == "send":
                    ops.append(Send(int(peer), tuple(segments)))
                elif kind == "recv":
                    combine = bool(rest and rest[0])
                    first = bool(len(rest) > 1 and rest[1])
                    ops.append(Recv(int(peer), tuple(segments), combine, first))
                else:
                    raise ScheduleError(f"unknown schedule op {kind!r}")
            programs.append(tuple(ops))
        return Schedule(
            op=data["op"],
            algorithm=data["algorithm"],
            nranks=int(data["nranks"]),
            root=int(data["root"]),
            nbytes=int(data["nbytes"]),
            segments=tuple((int(o), int(n)) for o, n in data["segments"]),
            programs=tuple(programs),
            params=data.get("params", {}),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ScheduleError(f"malformed schedule JSON: {err}") from err
