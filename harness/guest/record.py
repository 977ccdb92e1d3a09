"""What a run records about the guest it ran in (the manifest's `guest`), handed from the
host to the run inside through one environment variable."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict

ENV = "WANBENCH_GUEST"


class GuestRecord(BaseModel):
    """The guest a run ran in: the image booted, how its CPU ran, and its size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str
    accel: Literal["kvm", "tcg"]
    accel_why: str
    cpus: int
    memory_mb: int
    pin: list[int] | None = None

    @property
    def emulated(self) -> bool:
        return self.accel == "tcg"


def current() -> GuestRecord | None:
    """The guest this process runs in, as the host described it; None on the host."""
    text = os.environ.get(ENV)
    return GuestRecord.model_validate_json(text) if text else None
