#!/usr/bin/env bash
# The hosted-model recipe (README, "Hosted models: a recipe") worked against two local
# OpenAI-compatible servers instead of two providers, so that it runs anywhere and is
# tested (tests/cli/test_hosted_recipe.py runs these commands against loopback servers).
#
# Run it in a workspace that holds dbbench-base and examples/dbbench in git
# (`harnessctl init`), with AGENT_BASE and EDITOR_BASE set to the servers' base URLs, e.g.
#   AGENT_BASE=http://127.0.0.1:8080/v1 EDITOR_BASE=http://127.0.0.1:8081/v1 \
#     bash examples/hosted/local-recipe.sh
# A local server has no price litellm knows: the -p/--editor-param *_cost_per_token
# values give it one (here a hosted model's), so the estimate is not "cost unknown".
# api_key=none: a local server takes any key; a provider's key comes from its variable
# (OPENAI_API_KEY, ANTHROPIC_API_KEY), never from a flag or a file.
set -u

# 1. No terminal and no --yes: the estimate is printed, its bound is above --confirm-above,
#    so the run is refused with exit 2 before any rollout.
harnessctl evolve dbbench-base --split test --rollouts 1 \
  --policy openai/local-agent -p api_base="$AGENT_BASE" -p api_key=none \
  -p input_cost_per_token=0.000003 -p output_cost_per_token=0.000015 \
  --editor openai/local-editor --editor-param api_base="$EDITOR_BASE" \
  --editor-param api_key=none --editor-param max_tokens=2048 \
  --editor-param input_cost_per_token=0.000001 --editor-param output_cost_per_token=0.000005 \
  --directions format-validation --rounds 1 --editor-retries 0 \
  --max-looks 2 --allow-weak-gate --max-calls 3 --max-tokens 3000 \
  --max-editor-cost 0.50 --confirm-above 1 < /dev/null
echo "exit $? (2: refused, nothing ran)"

# 2. The same run, confirmed: it runs, and what it records stays within the bound.
harnessctl evolve dbbench-base --split test --rollouts 1 \
  --policy openai/local-agent -p api_base="$AGENT_BASE" -p api_key=none \
  -p input_cost_per_token=0.000003 -p output_cost_per_token=0.000015 \
  --editor openai/local-editor --editor-param api_base="$EDITOR_BASE" \
  --editor-param api_key=none --editor-param max_tokens=2048 \
  --editor-param input_cost_per_token=0.000001 --editor-param output_cost_per_token=0.000005 \
  --directions format-validation --rounds 1 --editor-retries 0 \
  --max-looks 2 --allow-weak-gate --max-calls 3 --max-tokens 3000 \
  --max-editor-cost 0.50 --confirm-above 1 --yes

# 3. What it cost, recorded per call (the agent's rollouts and the editor's calls).
harnessctl runs --command evolve
