"""The KVM probe's answer is kept for what it was asked of, until the machine boots again: a
second probe of the same image boots nothing, a changed image or a new boot probes again, and
an answer that says nothing lasting (a guest too slow to print its banner) is not kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.guest import accel

pytestmark = pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK),
                                reason="no usable /dev/kvm: the probe answers tcg at once")


@pytest.fixture
def booted(monkeypatch, tmp_path: Path) -> list[Path]:
    """A private cache and boot id, QEMU's name on PATH, and the images each probe booted."""
    monkeypatch.setenv("WANBENCH_CACHE", str(tmp_path / "cache"))
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("first-boot\n")
    monkeypatch.setattr(accel, "BOOT_ID", boot_id)
    monkeypatch.setattr(accel, "QEMU", "sh")
    images: list[Path] = []

    def boot(image: Path) -> tuple[accel.Accel, bool]:
        images.append(image)
        return accel.Accel("tcg", "KVM internal error"), True
    monkeypatch.setattr(accel, "_boot_under_kvm", boot)
    return images


def test_a_second_probe_of_the_same_image_boots_nothing(booted: list[Path], tmp_path: Path):
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"kernel")
    first, second = accel.probe(image), accel.probe(image)
    assert booted == [image]
    assert (first.mode, second.mode) == ("tcg", "tcg")
    assert second.why.startswith(first.why) and "probed earlier" in second.why


def test_a_changed_image_or_a_new_boot_is_probed_again(booted: list[Path], tmp_path: Path):
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"kernel")
    accel.probe(image)
    image.write_bytes(b"another kernel")
    accel.probe(image)
    accel.BOOT_ID.write_text("second-boot\n")
    accel.probe(image)
    assert booted == [image] * 3


def test_an_answer_that_does_not_last_is_not_kept(booted: list[Path], tmp_path: Path,
                                                  monkeypatch):
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"kernel")

    def slow(image: Path) -> tuple[accel.Accel, bool]:
        booted.append(image)
        return accel.Accel("tcg", "no kernel banner within 20 s"), False
    monkeypatch.setattr(accel, "_boot_under_kvm", slow)
    accel.probe(image)
    accel.probe(image)
    assert booted == [image] * 2


def test_an_unreadable_cache_is_probed_again(booted: list[Path], tmp_path: Path):
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"kernel")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / accel.PROBES_FILE).write_text("{not json")
    accel.probe(image)
    accel.probe(image)
    assert booted == [image]
