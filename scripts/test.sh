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
    # Agent Lightning's VERL path (agl.VERL, its daemon and the rescue daemon): verl 0.5.0, the
    # release agentlightning 0.3.0 names and whose AsyncvLLMServer it imports, without its
    # dependencies (they pin numpy<2 and tensordict<=0.9.1 and pull vLLM for GPU training):
    # only what agl.VERL's entrypoint imports on a CPU. fastapi 0.139.0 and OpenTelemetry
    # 1.44.0: agentlightning 0.3.0's store no longer pickles into Ray with fastapi >= 0.139.1
    # (a lock in its routers), and its LLM proxy exports spans to localhost:4318 with the OTLP
    # HTTP exporter >= 1.45 (docs/decisions.md)
    .venv-art/bin/pip install -q --no-deps 'verl==0.5.0'
    .venv-art/bin/pip install -q torch==2.13.0 'ray==2.60.0' 'hydra-core==1.3.8' \
        'codetiming==1.4.0' 'tensordict==0.10.0' 'datasets==5.2.0' 'torchdata==0.11.0' \
        'peft==0.21.2' 'fastapi==0.139.0' 'opentelemetry-api==1.44.0' \
        'opentelemetry-sdk==1.44.0' 'opentelemetry-exporter-otlp==1.44.0' \
        'opentelemetry-instrumentation==0.65b0'
}
# torch first, pinned: the trainers extra (verl, TRL) would otherwise resolve an unpinned torch
# to a multi-GB CUDA build; 2.13.0 is a CPU build here
install_main() {
    python3 -m venv .venv
    .venv/bin/pip install -q torch==2.13.0
    .venv/bin/pip install -q -e '.[test,trainers,alfworld,local-model,view,tau2,miniwob]' \
        -e examples/toyenv
}
# SkyRL (skyrl 0.4.0) requires Python >= 3.12 and this project's environments are 3.11, so
# the real-class half of tests/integrations/test_integration_skyrl.py runs in an environment
# of its own. pyenv's 3.12 is not on PATH everywhere (its shim refuses it), so it is looked
# for there too. torch first, pinned: no CPU build of torch for 3.12 is on PyPI, so this is
# PyPI's CUDA build (about 3 GB of downloads), which runs on the CPU. skyrl with its declared
# dependencies and, of its skyrl-train extra, only what the imported modules need (the full
# extra wants flash-attn, vllm-router and nixl, which need a GPU); docs/decisions.md
python312() {
    local py
    for py in python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
        if "$py" --version >/dev/null 2>&1; then
            echo "$py"
            return
        fi
    done
    echo "test.sh: no Python 3.12 (skyrl 0.4.0 requires it)" >&2
    return 1
}
install_skyrl() {
    local py
    py="$(python312)"
    "$py" -m venv .venv-skyrl
    .venv-skyrl/bin/pip install -q torch==2.13.0
    .venv-skyrl/bin/pip install -q -e . pytest pytest-timeout skyrl==0.4.0 transformers==5.16.1 \
        skyrl-gym==0.4.0 ray==2.57.0 torchdata==0.11.0 jaxtyping==0.3.11 loguru==0.7.3 \
        omegaconf==2.4.0 orjson==3.13.0 pybase64==1.5.1
}
# SkyRL's environment is installed and its tests run in the background, beside everything
# else: mostly downloads and unpacking, it overlaps the other runs' waits on sandboxes
skyrl_job() {
    install_skyrl
    echo "test.sh: SkyRL environment installed $((SECONDS - START)) s"
    HARNESSCTL_TEST_SKYRL=1 .venv-skyrl/bin/python -m pytest -q -p no:cacheprovider \
        tests/integrations/test_integration_skyrl.py
}
LOGS="$(mktemp -d)"
# the three test runs share their session fixtures (the small pool, made once for all)
HARNESSCTL_TEST_SHARED="$(mktemp -d)"
export HARNESSCTL_TEST_SHARED
skyrl_job >"$LOGS/skyrl.log" 2>&1 &
SKYRL=$!
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
# ART's and Agent Lightning's tests run in the background beside the main run (Ray, a
# trainer's entrypoint and servers: much of their time is waiting); their log is shown at the
# end, whole when they fail
HARNESSCTL_TEST_ART=1 HARNESSCTL_TEST_AGL=1 .venv-art/bin/python -m pytest -q \
    -p no:cacheprovider tests/integrations/test_integration_art.py \
    tests/integrations/test_integration_agentlightning.py >"$LOGS/art-tests.log" 2>&1 &
ART_TESTS=$!
# two test processes, each module whole in one (its module fixtures built once); the session
# worlds are built once for both (tests/helpers/worlds.py). On two cores one process left
# them a third idle: waits on sandboxes, servers and subprocesses (docs/decisions.md)
.venv/bin/python -m pytest -q -n 2 --dist loadfile
phase "all tests done"
for job in "art-tests:$ART_TESTS:ART and Agent Lightning tests" "skyrl:$SKYRL:SkyRL tests"; do
    pid="${job#*:}"
    pid="${pid%%:*}"
    if ! wait "$pid"; then
        tail -80 "$LOGS/${job%%:*}.log" >&2
        echo "test.sh: the ${job##*:} (or their environment) failed" >&2
        exit 1
    fi
    grep -v "^WARNING: Location" "$LOGS/${job%%:*}.log" | tail -6
done
phase "ART, Agent Lightning and SkyRL tests done"
