"""Which processes of a task container the host started, and the stop of everything else.

The host knows what it started by identity, not by a mark a process carries: after the
task's setup (its ``init`` scripts and its ``start`` script), it lists the container's
processes (:data:`LIST`, run with the checks' tools) and records each one's pid and start
time (``/proc/PID/stat`` field 22, set by the kernel when the process was created) but the
agent's shell and its ancestors. Those are the task's (a program ``start`` left running, a
daemon an init script left); every other process, whatever its environment or name says,
is the agent's, and the limits stop it (:data:`KILL_ALL`). A pid reused later has another
start time, so no process the agent starts can pass for one of the host's.

Both scripts use shell builtins only (no fork): they run even when a fork bomb holds nearly
every pid, and the killer stops every victim before it kills any, so none can fork a
replacement.
"""

from __future__ import annotations

#: ``PID PPID STARTTIME`` of every process but the lister itself.
LIST = r"""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$$" ] && continue
  read -r line < "$d/stat" 2>/dev/null || continue
  rest=${line##*) }
  set -f; set -- $rest; set +f
  printf '%s %s %s\n' "$p" "$2" "${20}"
done
exit 0
"""

#: Stop every process of the container but its first one, itself and the host's own
#: (``PID:STARTTIME`` arguments).
KILL_ALL = r"""
spare=" $* "
keep=" 1 $$ "
for round in 1 2 3 4 5 6; do
  victims=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue;; esac
    read -r line < "$d/stat" 2>/dev/null || continue
    rest=${line##*) }
    set -f; set -- $rest; set +f
    case "$spare" in *" $p:${20} "*) continue;; esac
    victims="$victims $p"
  done
  [ -z "$victims" ] && exit 0
  kill -STOP $victims 2>/dev/null
  kill -KILL $victims 2>/dev/null
done
exit 0
"""


def parse_listing(text: str) -> dict[int, tuple[int, str]]:
    """``{pid: (ppid, starttime)}`` from :data:`LIST`'s output (bad lines skipped)."""
    table: dict[int, tuple[int, str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and parts[2].isdigit():
            table[int(parts[0])] = (int(parts[1]), parts[2])
    return table


def hosts_processes(table: dict[int, tuple[int, str]], shell: int | None) -> list[str]:
    """``PID:STARTTIME`` of every listed process but the first one (always spared) and the
    agent's shell with its ancestors (the session: ``su - jack`` in ``start`` makes
    ``jack``'s shell the agent's, and the ``su`` and root shell above it with it)."""
    session: set[int] = set()
    pid = shell
    while pid is not None and pid in table and pid not in session:
        session.add(pid)
        pid = table[pid][0]
    return sorted(f"{p}:{start}" for p, (_, start) in table.items() if p != 1 and p not in session)
