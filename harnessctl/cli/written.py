"""Files a command writes into the workspace's versioned folders are committed."""

from __future__ import annotations


def commit_written(ws, paths, title: str, request) -> None:
    """Commit the files a command wrote into the workspace (profiles, baselines), with
    trailers like evolve's, and say on stderr what happened."""
    from ..vcs import commit_files
    from .render import err_console, escape

    message = (
        f"{title} on {request.suite.name}/{request.split} under {request.policy.id}\n\n"
        f"Harness-Policy: {request.policy.id}\n"
        f"Harness-Suite: {request.suite.name} {request.split}\n"
    )
    _, said = commit_files(ws.root, list(paths), message)
    err_console().print(escape(f"{len(paths)} file(s) written; {said}"), soft_wrap=True)
