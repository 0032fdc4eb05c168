"""coordkit.clients imports without kafka-python or aiokafka; using an adapter without its client
fails with one line naming the package to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Blocks a package the way a missing install does (None in sys.modules raises ImportError).
_BLOCK = "import sys; sys.modules.update({name: None for name in %r})\n"


def _run(blocked: list[str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCK % blocked + code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_core_modules_import_without_any_client() -> None:
    result = _run(
        ["kafka", "aiokafka"],
        "import coordkit.clients, coordkit.clients.group, coordkit.protocol.consumer\n"
        "import coordkit.clients.kafka_python, coordkit.clients.aiokafka\n"
        "print('ok')",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize(
    ("module", "blocked", "install"),
    [
        ("kafka_python", "kafka", "pip install 'kafka-python>=3.0'"),
        ("aiokafka", "aiokafka", "pip install aiokafka"),
    ],
)
def test_adapter_without_its_client_names_the_package(
    module: str, blocked: str, install: str
) -> None:
    result = _run(
        [blocked],
        f"from coordkit.clients.{module} import assignor\n"
        "try:\n"
        "    assignor('sticky')\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n",
    )
    assert result.returncode == 0, result.stderr
    [line] = result.stdout.splitlines()
    assert line.startswith("MissingDependencyError")
    assert install in line
