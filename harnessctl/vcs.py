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
        _ensure_identity(repo)
        repo.index.commit(message)


def _ensure_identity(repo) -> None:
    """Commits need an author; fall back to a local harnessctl identity if none is set."""
    import os

    if os.environ.get("GIT_AUTHOR_NAME") and os.environ.get("GIT_COMMITTER_NAME"):
        return
    with repo.config_reader() as reader:
        has_identity = reader.has_option("user", "name") and reader.has_option("user", "email")
    if not has_identity:
        with repo.config_writer() as writer:
            writer.set_value("user", "name", "harnessctl")
            writer.set_value("user", "email", "harnessctl@localhost")


def require_repo(directory: Path) -> None:
    """The workspace must be a git repository (``harnessctl init`` makes one)."""
    import git

    from .errors import HarnessctlError

    try:
        repo = git.Repo(directory)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise HarnessctlError(
            f"{directory} is not a git repository: run `harnessctl init {directory}` first"
        ) from None
    lock = Path(str(repo.git_dir)) / "index.lock"
    if lock.exists():
        raise HarnessctlError(
            f"{lock} exists: a git command was killed mid-way (or is running now); if no git "
            "command is running in this workspace, delete that file and rerun"
        )


def find_commit(directory: Path, needle: str) -> str | None:
    """The newest commit whose message contains ``needle`` (e.g. an edit-id trailer)."""
    import git

    repo = git.Repo(directory)
    if not repo.head.is_valid():
        return None
    for commit in repo.iter_commits(max_count=2000):
        if needle in str(commit.message):
            return commit.hexsha
    return None


def commit_files(directory: Path, paths: list[Path], message: str) -> tuple[str | None, str]:
    """Commit exactly ``paths`` (files a command wrote) in the repository at ``directory``.
    Returns (commit sha, what happened); the sha is None when nothing was committed, and
    the text says why (not a repository, outside it, nothing changed)."""
    import git

    try:
        repo = git.Repo(directory)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None, f"not committed: {directory} is not a git repository"
    top = Path(str(repo.working_tree_dir)).resolve()
    rels = []
    for path in paths:
        try:
            rels.append(Path(path).resolve().relative_to(top).as_posix())
        except ValueError:
            return None, f"not committed: {path} is outside the repository {top}"
    if not rels:
        return None, "nothing to commit"
    _ensure_identity(repo)
    try:
        repo.git.add("--", *rels)
        if not repo.git.diff("--cached", "--name-only", "--", *rels).strip():
            return None, "unchanged: nothing to commit"
        repo.git.commit("-m", message, "--", *rels)
    except git.GitCommandError as exc:
        return None, f"not committed: git said {_git_said(exc)}"
    sha = repo.head.commit.hexsha
    return sha, f"committed {len(rels)} file(s) as {sha[:12]}"


def commit_directory(directory: Path, path: Path, message: str) -> str:
    """Commit exactly ``path`` (a new harness directory) with ``message``."""
    import git

    repo = git.Repo(directory)
    rel = path.resolve().relative_to(Path(str(repo.working_tree_dir)).resolve()).as_posix()
    _ensure_identity(repo)
    try:
        repo.git.add("--", rel)
        repo.git.commit("-m", message, "--", rel)
    except git.GitCommandError as exc:
        from .errors import HarnessctlError

        raise HarnessctlError(f"git commit of {rel} failed: {_git_said(exc)}") from None
    return repo.head.commit.hexsha


def _git_said(exc) -> str:
    """The first line of what a failed git command printed (its status if nothing)."""
    return (str(exc.stderr or "").strip().splitlines() or [str(exc.status)])[0]
