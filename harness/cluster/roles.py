"""The roles a cluster worker may take and the Dask resource that names each."""

from __future__ import annotations

import re

# A topology host name is a role too (a worker standing for that host of the topology)
LOAD_ROLES = ("server", "hot", "cold", "stream")
ROLE_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")
RESOURCE_PREFIX = "role-"


def check_role(role: str) -> str:
    if not ROLE_PATTERN.fullmatch(role):
        raise ValueError(f"role {role!r} is not a role name: give one of "
                         f"{', '.join(LOAD_ROLES)} or a topology host name (lower-case letters, "
                         f"digits, '-' or '_')")
    return role


def resource(role: str) -> str:
    """The Dask worker resource a worker of this role holds (one unit: one shard at a time)."""
    return f"{RESOURCE_PREFIX}{check_role(role)}"


def roles_of(resources: dict[str, float]) -> list[str]:
    """The roles a worker's resources name."""
    return [name.removeprefix(RESOURCE_PREFIX) for name in resources
            if name.startswith(RESOURCE_PREFIX)]
