#!/usr/bin/env bash
# Install and run the tests: the README's test command, and what .ci/run runs last.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
phase() { echo "test.sh: $1 $((SECONDS - START)) s"; }
# ART (openpipe-art) pins litellm<=1.82, below what the project's environment resolves, so its
# real-class half of tests/integrations/test_integration_art.py runs in an environment of its
# own (torch and transformers: ART's tokenizer imports them); Agent Lightning
# (litellm[proxy]>=1.74) installs beside it, and its tests run there too.
# The two environments install side by side (pip spends much of its time unpacking and
# waiting on files, so two overlap well on two cores); each one's log is shown if it fails.
# (one command a line: under `set -e` a failed step of an && list would not stop the script)
install_art() {
    python3 -m venv .venv-art
    .venv-art/bin/pip install -q torch==2.13.0
    .venv-art/bin/pip install -q -e . 'openpipe-art==0.5.18' 'agentlightning==0.3.0' \
        transformers pytest pytest-timeout
}
# torch first, pinned: the trainers extra (verl, TRL) would otherwise resolve an unpinned torch
# to a multi-GB CUDA build; 2.13.0 is a CPU build here
install_main() {
    python3 -m venv .venv
    .venv/bin/pip install -q torch==2.13.0
    .venv/bin/pip install -q -e '.[test,trainers,alfworld,local-model,view,tau2]' \
        -e examples/toyenv
}
LOGS="$(mktemp -d)"
install_art >"$LOGS/art.log" 2>&1 &
ART=$!
install_main >"$LOGS/main.log" 2>&1 &
MAIN=$!
for job in "art:$ART" "main:$MAIN"; do
    if ! wait "${job#*:}"; then
        tail -40 "$LOGS/${job%%:*}.log" >&2
        echo "test.sh: installing the ${job%%:*} environment failed" >&2
        exit 1
    fi
done
grep -v "^WARNING: Location" "$LOGS/art.log" "$LOGS/main.log" | tail -20 || true
phase "environments installed"
HARNESSCTL_TEST_ART=1 HARNESSCTL_TEST_AGL=1 .venv-art/bin/python -m pytest -q \
    tests/integrations/test_integration_art.py tests/integrations/test_integration_agentlightning.py
phase "ART and Agent Lightning tests done"
# two test processes, each module whole in one (its module fixtures built once); the session
# worlds are built once for both (tests/helpers/worlds.py). On two cores one process left
# them a third idle: waits on sandboxes, servers and subprocesses (docs/decisions.md)
.venv/bin/python -m pytest -q -n 2 --dist loadfile
phase "all tests done"
