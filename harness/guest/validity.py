"""The validity rule a guest adds to those of clients.validity: under an emulated CPU (QEMU's
TCG) time runs at the emulator's pace, so timings say nothing of the kernel; what the run
counted (errors, overflows, replies) still holds."""

from __future__ import annotations

from harness.guest.record import GuestRecord

EMULATED_CPU = "emulated CPU: timings not comparable"


def emulated_cpu(guest: GuestRecord | None) -> str | None:
    return EMULATED_CPU if guest is not None and guest.emulated else None
