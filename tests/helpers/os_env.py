"""Shared by the os_interaction tests: the task image must be there (CI builds it)."""

from __future__ import annotations

import shutil
import subprocess

from harnessctl.envs.os_interaction.container import DEFAULT_IMAGE
from tests.helpers.ci import unavailable


def require_os_image() -> None:
    """Skip (fail under CI) unless a Docker engine runs and the task image is built."""
    if shutil.which("docker") is None:
        unavailable("the os_interaction tests", "no docker CLI", module=True)
    probe = subprocess.run(
        ["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True, check=False
    )
    if probe.returncode != 0:
        unavailable(
            "the os_interaction tests",
            f"no Docker engine or no {DEFAULT_IMAGE} (scripts/build-os-image.sh)",
            module=True,
        )


def constructor_library(message: bytes) -> bytes:
    """A minimal x86-64 ELF shared object whose constructor (``DT_INIT``) writes ``message``
    to stdout and exits the process with status 0: what a hostile agent names as an NSS
    module (``/etc/nsswitch.conf``) or a preload library, built here byte by byte so the
    tests need no compiler (no section headers; a hash, symbol and string table of one
    empty entry each, as the loader wants)."""
    import struct

    ehdr, phdrs = 64, 3 * 56
    dynamic = ehdr + phdrs  # 232
    tags = 7
    hash_at = dynamic + tags * 16
    symtab_at = hash_at + 16
    strtab_at = symtab_at + 24
    code_at = strtab_at + 8
    code_len = 33
    msg_at = code_at + code_len
    total = msg_at + len(message)
    lea_next = code_at + 17
    code = (
        b"\xb8\x01\x00\x00\x00"  # mov eax, 1 (write)
        + b"\xbf\x01\x00\x00\x00"  # mov edi, 1
        + b"\x48\x8d\x35"
        + struct.pack("<i", msg_at - lea_next)  # lea rsi, [rip+msg]
        + b"\xba"
        + struct.pack("<I", len(message))  # mov edx, len
        + b"\x0f\x05"  # syscall
        + b"\xb8\xe7\x00\x00\x00"  # mov eax, 231 (exit_group)
        + b"\x31\xff"  # xor edi, edi
        + b"\x0f\x05"  # syscall
    )
    assert len(code) == code_len
    header = (
        b"\x7fELF\x02\x01\x01"
        + b"\x00" * 9
        + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, ehdr, 0, 0, ehdr, 56, 3, 64, 0, 0)
    )
    program = b"".join(
        struct.pack("<IIQQQQQQ", *fields)
        for fields in (
            (1, 7, 0, 0, 0, total, total, 0x1000),  # PT_LOAD, read/write/execute
            (2, 6, dynamic, dynamic, dynamic, tags * 16, tags * 16, 8),  # PT_DYNAMIC
            (0x6474E551, 6, 0, 0, 0, 0, 0, 16),  # PT_GNU_STACK: no executable stack
        )
    )
    dyn = b"".join(
        struct.pack("<qQ", tag, value)
        for tag, value in (
            (4, hash_at),  # DT_HASH
            (5, strtab_at),  # DT_STRTAB
            (6, symtab_at),  # DT_SYMTAB
            (10, 1),  # DT_STRSZ
            (11, 24),  # DT_SYMENT
            (12, code_at),  # DT_INIT
            (0, 0),  # DT_NULL
        )
    )
    tables = struct.pack("<IIII", 1, 1, 0, 0) + b"\x00" * 24 + b"\x00" * 8
    blob = header + program + dyn + tables + code + message
    assert len(blob) == total
    return blob
