"""The cluster tests' certificates: a CA of their own and the node certificate it signed."""

from __future__ import annotations

import shutil

import pytest

from harness.cluster.security import Certs, write


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: the cluster's certificates are written with it")
    return write(tmp_path_factory.mktemp("cluster-certs") / "certs")
