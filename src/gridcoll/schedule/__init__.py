"""The schedule layer: the segment-level IR, its validator and its JSON form."""

from gridcoll.schedule.ir import CONTROL_BYTES, OPERATIONS, Op, Recv, Schedule, Send, split_segments
from gridcoll.schedule.serialize import schedule_from_json, schedule_to_json
from gridcoll.schedule.validate import expected_holdings, initial_holdings, validate

__all__ = [
    "CONTROL_BYTES",
    "OPERATIONS",
    "Op",
    "Recv",
    "Schedule",
    "Send",
    "expected_holdings",
    "initial_holdings",
    "schedule_from_json",
    "schedule_to_json",
    "split_segments",
    "validate",
]
