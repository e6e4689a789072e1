"""Every environment variable and default that harnessctl reads, in one place."""

from __future__ import annotations

from .runtime import wire

# --- host-side settings (layers: built-in < harnessctl.yaml < HARNESSCTL_* env < flags) ---
ENV_STORE_URL = "HARNESSCTL_STORE_URL"  # any SQLAlchemy URL; default: SQLite in .harnessctl/
ENV_CACHE_FROM = "HARNESSCTL_CACHE_FROM"  # read-through rollout caches, os.pathsep-separated
ENV_WORKSPACE = "HARNESSCTL_WORKSPACE"  # workspace root; default: nearest harnessctl.yaml upwards
ENV_SANDBOX = "HARNESSCTL_SANDBOX"  # sandbox backend name (local, docker)
ENV_WORKERS = "HARNESSCTL_WORKERS"
ENV_EXECUTOR = "HARNESSCTL_EXECUTOR"  # where rollouts run: local (default) or ray
ENV_RAY_ADDRESS = "HARNESSCTL_RAY_ADDRESS"  # Ray cluster for --executor ray
ENV_POLICY = "HARNESSCTL_POLICY"  # default policy model string
ENV_DOCKER_FRESH = "HARNESSCTL_DOCKER_FRESH"  # 1: one container per rollout (--fresh-container)
ENV_GATEWAY_PORT = "HARNESSCTL_GATEWAY_PORT"  # opt-in loopback TCP port for the gateway
ENV_MODEL_DIR = "HARNESSCTL_MODEL_DIR"  # where the local models' files are kept
# pip's index arguments when fetching a catalogue model (e.g. --no-index --find-links DIR)
ENV_MODEL_INDEX = "HARNESSCTL_MODEL_INDEX"
ENV_CONFIRM_USD = "HARNESSCTL_CONFIRM_USD"  # a paid run's cost bound above this asks (--yes)
ENV_MODEL_TIMEOUT = "HARNESSCTL_MODEL_TIMEOUT"  # seconds one model call may take (--model-timeout)
# tokens/s below which the local model server warns at start (--min-speed)
ENV_MODEL_MIN_SPEED = "HARNESSCTL_MODEL_MIN_SPEED"

# Variables that never reach a sandbox, whatever else is passed through.
SECRET_ENV_PREFIXES = (
    "HARNESSCTL_",
    "OPENAI_",
    "ANTHROPIC_",
    "AZURE_",
    "AWS_",
    "GEMINI_",
    "GOOGLE_",
    "MISTRAL_",
    "COHERE_",
    "HF_",
    "HUGGINGFACE_",
    "LITELLM_",
    "GROQ_",
    "TOGETHER",
    "DEEPSEEK_",
    "XAI_",
    "OPENROUTER_",
)

# --- the contract between host and sandbox runtime: defined once, in the stdlib-only
# harnessctl/runtime/wire.py that the sandbox imports too; re-exported here ---
RT_ENV_GATEWAY = wire.ENV_GATEWAY
RT_ENV_TOKEN = wire.ENV_TOKEN
RT_ENV_TOKEN_FILE = wire.ENV_TOKEN_FILE
RT_ENV_MANIFEST = wire.ENV_MANIFEST
RT_ENV_LIMITS = wire.ENV_LIMITS
RT_ENV_ENV = wire.ENV_ENV
RT_ENV_ENV_PATH = wire.ENV_ENV_PATH
RT_ENV_HARNESS = wire.ENV_HARNESS_DIR
RT_ENV_TASK = wire.ENV_TASK_DIR

WORKSPACE_FILE = "harnessctl.yaml"
STATE_DIR = ".harnessctl"
DEFAULT_ROLLOUTS = 3
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONFIRM_USD = 5.0
"""USD above which a paid run's cost bound needs confirmation (``eval --yes``)."""
DEFAULT_MAX_CALLS = 40
DEFAULT_MAX_TOKENS = 60_000
# environment steps per rollout of a host-served environment (its own default wins when set)
DEFAULT_MAX_STEPS = 50
INFRA_RETRIES = 2
# seconds one model call may take when the run sets none (--model-timeout): a provider's
# call is re-sent after it (the gateway's retries); a loopback server's is sent once and
# gets longer, since a CPU model on a busy machine is slow but alive (docs/local-models.md)
DEFAULT_MODEL_TIMEOUT_S = 120.0
DEFAULT_LOCAL_MODEL_TIMEOUT_S = 600.0
