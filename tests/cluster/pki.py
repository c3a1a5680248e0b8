"""Certificates and keys for the test cluster, made with the ``openssl`` command line.

One CA signs everything: the apiserver's serving certificate, the client certificates of the
admin, the controller manager, the scheduler and each process node
(``CN=system:node:<name>, O=system:nodes``, which the Node authorizer keys off). A separate EC key
pair signs service-account tokens. EC P-256 keys keep generation instant. Used by
:mod:`tests.cluster.controlplane` and :mod:`tests.cluster.kubeconfigs`.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tempfile
from pathlib import Path

#: Names the apiserver answers to: loopback, plus the in-cluster service names and first IP.
APISERVER_SANS = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    "IP:10.96.0.1",
)

DAYS = 3650


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _new_key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
    path.chmod(0o600)


def make_ca(folder: Path, name: str = "procmesh-ca") -> KeyPair:
    """Create ``ca.crt``/``ca.key`` in ``folder``."""
    pair = KeyPair(folder / "ca.crt", folder / "ca.key")
    _new_key(pair.key)
    _openssl(
        "req", "-x509", "-new", "-key", str(pair.key), "-out", str(pair.cert), "-days", str(DAYS),
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
    )
    return pair


def make_cert(
    ca: KeyPair,
    folder: Path,
    stem: str,
    common_name: str,
    *,
    organization: str | None = None,
    sans: tuple[str, ...] = (),
    server: bool = False,
) -> KeyPair:
    """Create ``<stem>.crt``/``<stem>.key`` signed by ``ca`` (client auth, plus server auth if asked)."""
    pair = KeyPair(folder / f"{stem}.crt", folder / f"{stem}.key")
    _new_key(pair.key)
    subject = f"/CN={common_name}" + (f"/O={organization}" if organization else "")
    usages = "serverAuth,clientAuth" if server else "clientAuth"
    extensions = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usages}",
    ]
    if sans:
        extensions.append("subjectAltName=" + ",".join(sans))
    with tempfile.TemporaryDirectory() as scratch:
        csr = Path(scratch) / "req.csr"
        ext = Path(scratch) / "ext.cnf"
        ext.write_text("\n".join(extensions) + "\n")
        _openssl("req", "-new", "-key", str(pair.key), "-out", str(csr), "-subj", subject)
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
            "-CAcreateserial", "-CAserial", str(Path(scratch) / "ca.srl"),
            "-out", str(pair.cert), "-days", str(DAYS), "-extfile", str(ext),
        )
    return pair


def make_service_account_keys(folder: Path) -> KeyPair:
    """Create ``sa.key`` (signs service-account tokens) and ``sa.pub`` (verifies them)."""
    key = folder / "sa.key"
    pub = folder / "sa.pub"
    _new_key(key)
    _openssl("pkey", "-in", str(key), "-pubout", "-out", str(pub))
    return KeyPair(pub, key)
