"""docs/serve.md's SASL_SSL session, as written: its ``coordkit serve`` command in a directory
of PEM files, then its Python client, the fixed ports exchanged for free ones."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from coordkit.testing.servers.ports import free_port
from harness.docs import code_block, page
from serve.security_servers import SecureServe, make_pems

SECTION = "Listeners, TLS and SASL"


def test_the_sasl_ssl_session_of_the_docs_runs(tmp_path: Path) -> None:
    pems = make_pems(tmp_path)
    ports = {"9092": str(free_port()), "9093": str(free_port())}

    def with_free_ports(text: str) -> str:
        for fixed, free in ports.items():
            text = text.replace(f"127.0.0.1:{fixed}", f"127.0.0.1:{free}")
        return text

    command = code_block(page("serve.md"), SECTION, "sh").text.replace("\\\n", " ")
    words = shlex.split(with_free_ports(command))
    assert words[:2] == ["coordkit", "serve"]
    # SecureServe runs `coordkit serve --port 0 WORDS` from this process's directory: the PEM
    # files are named from the session's directory.
    words = [w.replace("=server-keystore.pem", f"={pems}/server-keystore.pem")
             .replace("=ca.pem", f"={pems}/ca.pem") for w in words[2:]]  # fmt: skip
    server = SecureServe(words)
    try:
        client = with_free_ports(code_block(page("serve.md"), SECTION, "python").text)
        result = subprocess.run([sys.executable, "-c", client], cwd=pems, capture_output=True,
                                text=True, timeout=120, check=False)  # fmt: skip
        assert result.returncode == 0, result.stderr
    finally:
        out, err = server.stop()
    assert "alice-secret" not in out + err
