"""The ZooKeeper and redis-server versions the test fixtures start, for the session's header.

The documentation claims server versions (docs/getting-started.md, Supported versions); a tox env
names the ones it tests in ``COORDKIT_EXPECT_ZOOKEEPER`` and ``COORDKIT_EXPECT_REDIS_SERVER`` (a
version prefix such as ``3.8`` or ``6.2``), and the session stops before any test when the binary
the kit would start is another version, so an env never passes on a server it does not claim. A
missing server is not an error here: the tests that need it fail with the install command.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile

from coordkit.testing.servers import redis_server, zookeeper_server

EXPECT_ZOOKEEPER = "COORDKIT_EXPECT_ZOOKEEPER"
EXPECT_REDIS_SERVER = "COORDKIT_EXPECT_REDIS_SERVER"
POM = "META-INF/maven/org.apache.zookeeper/zookeeper/pom.properties"


def zookeeper_version() -> tuple[str, str] | None:
    """(version, jar) of the ZooKeeper the fixtures start, from the jar's Maven properties."""
    jar = zookeeper_server.ZOOKEEPER_JAR
    try:
        with zipfile.ZipFile(jar) as archive:
            properties = archive.read(POM).decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    match = re.search(r"^version=(\S+)", properties, re.MULTILINE)
    return (match.group(1), str(jar.resolve())) if match else None


def redis_server_version() -> tuple[str, str] | None:
    """(version, path) of the redis-server on PATH, the one the fixtures start."""
    try:
        binary = redis_server.redis_server_binary()
    except redis_server.RedisServerMissingError:
        return None
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\bv=(\S+)", out)
    return (match.group(1), binary) if match else None


def _matches(found: str, expected: str) -> bool:
    return found == expected or found.startswith(expected + ".")


def header() -> tuple[list[str], list[str]]:
    """The header's lines, and one error per server whose version is not the expected one."""
    lines: list[str] = []
    errors: list[str] = []
    for name, variable, found, hint in (
        ("ZooKeeper", EXPECT_ZOOKEEPER, zookeeper_version(), zookeeper_server.INSTALL_HINT),
        ("redis-server", EXPECT_REDIS_SERVER, redis_server_version(), redis_server.INSTALL_HINT),
    ):
        expected = os.environ.get(variable, "")
        if found is None:
            lines.append(f"{name}: not installed ({hint})")
            continue
        version, where = found
        claim = f", expected {expected}" if expected else ""
        lines.append(f"{name}: {version} ({where}{claim})")
        if expected and not _matches(version, expected):
            errors.append(
                f"{name} {version} ({where}) is not the {expected} this env tests "
                f"({variable}={expected}); install it, or set {variable} to the version to test"
            )
    return lines, errors
