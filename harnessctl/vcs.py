"""Git through gitpython, imported lazily (it is slow to import)."""

from __future__ import annotations

from pathlib import Path


def ensure_repo(directory: Path, *, message: str) -> None:
    """Make ``directory`` a git repository with everything committed once."""
    import git

    try:
        repo = git.Repo(directory)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        repo = git.Repo.init(directory)
    repo.git.add(A=True)
    if repo.is_dirty(index=True, untracked_files=False) or not repo.head.is_valid():
        with repo.config_reader() as reader:
            has_identity = reader.has_option("user", "name") and reader.has_option("user", "email")
        if not has_identity:
            with repo.config_writer() as writer:
                writer.set_value("user", "name", "harnessctl")
                writer.set_value("user", "email", "harnessctl@localhost")
        repo.index.commit(message)
