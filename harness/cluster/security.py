"""Who may use a cluster. Whoever can submit work to a worker runs Python there as the worker
runs, root (it starts servers and generators, pins CPUs, enters namespaces), so a cluster's
scheduler, workers and runs speak Dask's TLS only, with encryption required, and each side
proves itself with a certificate signed by the cluster's own CA: a worker trusts anyone
holding one.

`wanbench cluster certs DIR` writes that CA's certificate and one node certificate and key,
shared by every host (Dask checks the CA's signature, not host names); the CA's key is
discarded once it has signed, so no other certificate can be made: copy DIR to every host
and the run's machine, and write a new one to change who is trusted. A scheduler at plain
tcp:// is refused unless --insecure says that everyone who can reach it may run code as root
on every worker.

A worker listens on the address it reaches the scheduler from (on a topology's host, its
topology address), never on all interfaces; so does the HTTP server that Dask's scheduler and
workers run even without a dashboard (health and metrics, unencrypted and read-only), on
any free port of the same address (listening_options)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cluster import ClusterError

CA, CERT, KEY = "ca.pem", "node.pem", "node.key"
VALID_DAYS = 365
CURVE = "prime256v1"
# Dask's setting that refuses an unencrypted connection, for the processes it cannot be
# given to as a Security (`dask scheduler`, `dask worker`)
REQUIRE_ENCRYPTION_ENV = {"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}
CERTS_FIX = "`wanbench cluster certs DIR` writes them; copy DIR to every host"
CA_EXTENSIONS = ("basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign")
NODE_EXTENSIONS = ("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth,clientAuth\n")


@dataclass(frozen=True)
class Certs:
    """A directory holding the cluster's CA certificate and its node certificate and key."""

    directory: Path

    @classmethod
    def found(cls, directory: Path) -> Certs:
        """The certificates in directory, or ClusterError naming what is missing."""
        certs = cls(Path(directory))
        missing = [name for name in (CA, CERT, KEY) if not certs.path(name).is_file()]
        if missing:
            raise ClusterError(f"{directory} holds no {', '.join(missing)}: give the directory "
                               f"the cluster's certificates are in ({CERTS_FIX})")
        return certs

    def path(self, name: str) -> Path:
        return self.directory / name

    def dask_args(self) -> list[str]:
        """`dask scheduler`'s and `dask worker`'s options for them."""
        return ["--tls-ca-file", str(self.path(CA)), "--tls-cert", str(self.path(CERT)),
                "--tls-key", str(self.path(KEY))]

    def security(self) -> Any:
        """A distributed.security.Security for a client of the cluster (encryption required)."""
        from distributed.security import Security  # the cluster extra: only when connecting

        cert, key = str(self.path(CERT)), str(self.path(KEY))
        return Security(require_encryption=True, tls_ca_file=str(self.path(CA)),
                        tls_client_cert=cert, tls_client_key=key, tls_scheduler_cert=cert,
                        tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key)


@dataclass(frozen=True)
class Access:
    """How to reach a scheduler: its address, with the certificates for tls:// (None: plain
    tcp://, allowed by --insecure)."""

    address: str
    certs: Certs | None

    def options(self) -> list[str]:
        """The wanbench options that give this access (--certs DIR, or --insecure)."""
        return ["--certs", str(self.certs.directory)] if self.certs else ["--insecure"]


def access(address: str, certs: Path | None, insecure: bool) -> Access:
    """The access to the scheduler at address: tls:// with the certificates in certs;
    tcp:// only when insecure; else ClusterError naming the fix."""
    scheme = address.partition("://")[0] if "://" in address else ""
    if scheme == "tls":
        if certs is None:
            raise ClusterError(f"{address}: tls:// needs the cluster's certificates: give "
                               f"--certs DIR ({CERTS_FIX})")
        return Access(address, Certs.found(certs))
    if scheme == "tcp" and insecure:
        return Access(address, None)
    if scheme == "tcp":
        raise ClusterError(f"{address} is plain TCP: whoever reaches the scheduler can run code "
                           f"as root on every worker; give tls://HOST:PORT with --certs DIR "
                           f"({CERTS_FIX}), or --insecure if everyone on that network may")
    raise ClusterError(f"{address!r} is not a scheduler address: give tls://HOST:PORT (with "
                       f"--certs DIR; {CERTS_FIX})")


def reaching(address: str) -> str:
    """This machine's address toward the scheduler at address: the source the kernel picks
    for it (a UDP connect sends nothing)."""
    parts = urllib.parse.urlsplit(address)
    if not parts.hostname or parts.port is None:
        raise ClusterError(f"{address!r} names no HOST:PORT: give tls://HOST:PORT")
    family = socket.AF_INET6 if ":" in parts.hostname else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((parts.hostname, parts.port))
        except OSError as exc:
            raise ClusterError(f"no route from this machine to the scheduler {address} "
                               f"({exc.strerror}): give the worker's --host") from None
        return probe.getsockname()[0]


def listening_options(host: str) -> list[str]:
    """`dask scheduler`'s or `dask worker`'s options that keep its every listener on host."""
    http = f"[{host}]:0" if ":" in host else f"{host}:0"
    return ["--host", host, "--no-dashboard", "--dashboard-address", http]


def write(directory: Path, days: int = VALID_DAYS) -> Certs:
    """A new CA, its certificate and one node certificate and key it signed, into directory
    (created if absent); the CA's key never leaves a private scratch directory. Refuses to
    replace certificates already there (their hosts would stop trusting each other)."""
    if shutil.which("openssl") is None:
        raise ClusterError("openssl is not installed; fix: apt-get install openssl")
    certs = Certs(Path(directory))
    present = [name for name in (CA, CERT, KEY) if certs.path(name).exists()]
    if present:
        raise ClusterError(f"{directory} already holds {', '.join(present)}: remove them or "
                           f"give another directory (every host needs the new ones then)")
    with tempfile.TemporaryDirectory(prefix="wanbench-certs-") as scratch:
        made = Path(scratch)
        key_args = ["-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{CURVE}", "-nodes"]
        _openssl("req", "-x509", "-new", *key_args, "-keyout", made / "ca.key",
                 "-out", made / CA, "-days", str(days), "-subj", "/CN=wanbench cluster CA",
                 *(arg for extension in CA_EXTENSIONS for arg in ("-addext", extension)))
        _openssl("req", "-new", *key_args, "-keyout", made / KEY, "-out", made / "node.csr",
                 "-subj", "/CN=wanbench cluster node")
        (made / "node.ext").write_text(NODE_EXTENSIONS)
        _openssl("x509", "-req", "-in", made / "node.csr", "-CA", made / CA, "-CAkey",
                 made / "ca.key", "-set_serial", hex(secrets.randbits(63)), "-days", str(days),
                 "-sha256", "-extfile", made / "node.ext", "-out", made / CERT)
        certs.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, mode in ((CA, 0o644), (CERT, 0o644), (KEY, 0o600)):
            _write_new(certs.path(name), (made / name).read_bytes(), mode)
    return certs


def _openssl(*args: str | Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise ClusterError(f"openssl {args[0]} failed: {said[-1] if said else done.returncode}")


def _write_new(path: Path, content: bytes, mode: int) -> None:
    """A new file with its mode from the start (a key is never readable by others)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "wb") as out:
        out.write(content)
