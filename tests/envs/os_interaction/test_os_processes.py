"""The host's record of the processes it started, and the session's marker (no Docker)."""

from __future__ import annotations

from harnessctl.envs.os_interaction.processes import hosts_processes, parse_listing
from harnessctl.envs.os_interaction.session import marker_line, strip_markers

#: ``PID PPID STARTTIME`` as the lister prints it after 4.N4.0's setup: the container's first
#: process, root's shell (docker exec: no parent in the container), ``su - jack`` and jack's
#: shell (the agent's), a program ``start`` left in the background, and a daemon of an init
#: script reparented to the first process.
LISTING = """1 0 100
7 0 150
30 7 200
31 30 201
25 7 180
12 1 120
bad line
"""


def test_the_host_spares_what_setup_left_but_not_the_agents_shell_and_its_ancestors():
    table = parse_listing(LISTING)
    assert table[31] == (30, "201") and len(table) == 6
    assert hosts_processes(table, shell=31) == ["12:120", "25:180"]
    # without su, root's shell is the agent's: su and jack's shell would be start's
    assert hosts_processes(table, shell=7) == ["12:120", "25:180", "30:200", "31:201"]


def test_a_stopped_commands_output_never_shows_a_marker():
    raw = b"partial output\n__HX_0123456789abcdef__ 0 7 0 /root\nmore\n"
    assert strip_markers(raw) == b"partial output\nmore\n"
    line = marker_line("0123456789abcdef")
    assert line.startswith("printf '\\n__HX_%s__ %s %s %s %s\\n' '0123456789abcdef' \"$?\"")
    assert '"$$" "$EUID" "$PWD"' in line  # the shell, its user and its directory
