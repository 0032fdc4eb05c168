"""``coordkit acls`` (kafka-acls' options and output) on a memory store."""

from __future__ import annotations

import uuid

import pytest

from coordkit.cli import main
from coordkit.plugins import open_store


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_remove(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://acls-cli-{uuid.uuid4().hex}"
    holder = open_store(url)  # keeps the in-process store alive between commands
    try:
        code, out, err = run(capsys, "acls", "--store", url, "--add", "--allow-principal",
                             "User:alice", "--operation", "Read", "--operation", "Describe",
                             "--topic", "payments")  # fmt: skip
        assert (code, err) == (0, "")
        pattern = "`ResourcePattern(resourceType=TOPIC, name=payments, patternType=LITERAL)`"
        assert out.splitlines() == [
            f"Adding ACLs for resource {pattern}: ",
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ",
            " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) ",
            "",
            f"Current ACLs for resource {pattern}: ",
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ",
            " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) ",
            "",
        ]
        assert holder.exists("/kafka-acl/Topic/payments") is not None
        code, out, _ = run(capsys, "acls", "--store", url, "--add", "--deny-principal",
                           "User:bob", "--group", "app-", "--resource-pattern-type",
                           "prefixed")  # fmt: skip
        assert code == 0
        assert holder.exists("/kafka-acl-extended/prefixed/Group/app-") is not None
        code, out, _ = run(capsys, "acls", "--store", url, "--list", "--principal", "User:bob")
        assert code == 0
        assert "operation=ALL, permissionType=DENY" in out
        assert "payments" not in out
        code, out, _ = run(capsys, "acls", "--store", url, "--remove", "--topic", "payments")
        assert code == 0
        assert out.count("Removed ") == 2
        assert holder.exists("/kafka-acl/Topic/payments") is None
    finally:
        holder.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--list", "--allow-principal", "User:a"], "--list takes resources and --principal"),
        (["--add", "--topic", "t"], "--add needs --allow-principal or --deny-principal"),
        (["--add", "--allow-principal", "alice", "--topic", "t"],
         "--allow-principal 'alice': a principal is 'Type:name'"),
        (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
         "--operation Write: a Group resource supports only"),
        (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"],
         "--operation 'Fly': not one of"),
        (["--add", "--allow-principal", "User:a", "--topic", "t",
          "--resource-pattern-type", "match"], "--resource-pattern-type match: with --add"),
        (["--remove"], "--remove needs a resource"),
        ([], "give one of --add, --remove and --list"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    url = f"memory://acls-cli-{uuid.uuid4().hex}"
    code, out, err = run(capsys, "acls", "--store", url, *argv)
    assert code == 2
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("error: ")
    assert message in line
