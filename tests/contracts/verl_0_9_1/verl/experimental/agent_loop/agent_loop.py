"""verl.experimental.agent_loop.agent_loop (verl 0.9.1): the agent loop API, the registry,
and a worker/manager that run registered loops and batch their outputs as verl does
(prompts left-padded to prompt_length, responses right-padded to response_length,
``rm_scores`` with the reward on the last valid response token when every row has one,
extra_fields as non-tensor columns)."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import numpy as np
from pydantic import BaseModel

from verl.protocol import DataProto


class AgentLoopMetrics(BaseModel):
    generate_sequences: float = 0.0
    tool_calls: float = 0.0
    compute_score: float = 0.0
    num_preempted: int = -1


class AgentLoopOutput(BaseModel):
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None = None
    routed_experts: Any | None = None
    multi_modal_data: dict[str, Any] | None = None
    reward_score: float | None = None
    num_turns: int = 0
    metrics: AgentLoopMetrics  # required, no default
    extra_fields: dict[str, Any] = {}


class AgentLoopBase:
    def __init__(
        self,
        trainer_config,
        server_manager,
        tokenizer,
        processor,
        dataset_cls,
        data_config,
        hf_model_type=None,
        **kwargs,
    ):
        self.config = trainer_config.config
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.data_config = data_config.config

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        raise NotImplementedError


_agent_loop_registry: dict[str, dict] = {}


def register(agent_name: str):
    def decorator(subclass):
        _agent_loop_registry[agent_name] = {
            "_target_": f"{subclass.__module__}.{subclass.__qualname__}"
        }
        return subclass

    return decorator


class _Wrap:
    def __init__(self, config):
        self.config = config


def _instantiate(target: str, **kwargs):
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


class AgentLoopWorker:
    def __init__(self, config, llm_client, teacher_client=None, reward_loop_worker_handles=None):
        self.config = config
        self.llm_client = llm_client

    async def generate_sequences(self, batch: DataProto) -> DataProto:
        rollout = self.config.actor_rollout_ref.rollout
        sampling_params = {
            "temperature": rollout.temperature,
            "top_p": rollout.top_p,
            "top_k": rollout.top_k,
            "repetition_penalty": 1.0,
            "logprobs": rollout.calculate_log_probs,
        }
        names = batch.non_tensor_batch.get("agent_name")
        if names is None:
            names = np.array([rollout.agent.default_agent_loop] * len(batch), dtype=object)
        outputs = []
        for i in range(len(batch)):
            row = {k: v[i] for k, v in batch.non_tensor_batch.items() if k not in ("agent_name",)}
            loop = _instantiate(
                _agent_loop_registry[names[i]]["_target_"],
                trainer_config=_Wrap(self.config),
                server_manager=self.llm_client,
                tokenizer=None,
                processor=None,
                dataset_cls=None,
                data_config=_Wrap({}),
                hf_model_type=None,
                tools=None,
            )
            outputs.append(await loop.run(sampling_params, **row))
        return self._postprocess(outputs, batch)

    def _postprocess(self, outputs, batch):
        rollout = self.config.actor_rollout_ref.rollout
        P, R = rollout.prompt_length, rollout.response_length
        n = len(outputs)
        prompts = np.zeros((n, P), dtype=np.int64)
        responses = np.zeros((n, R), dtype=np.int64)
        mask = np.zeros((n, R), dtype=np.int64)
        attention = np.zeros((n, P + R), dtype=np.int64)
        logprobs = np.zeros((n, R), dtype=np.float32)
        for i, o in enumerate(outputs):
            p, r = o.prompt_ids[-P:], o.response_ids[:R]
            prompts[i, P - len(p) :] = p
            responses[i, : len(r)] = r
            mask[i, : len(r)] = o.response_mask[: len(r)]
            attention[i, P - len(p) : P + len(r)] = 1
            if o.response_logprobs is not None:
                logprobs[i, : len(r)] = o.response_logprobs[: len(r)]
        out = {
            "prompts": prompts,
            "responses": responses,
            "response_mask": mask,
            "input_ids": np.concatenate([prompts, responses], axis=1),
            "attention_mask": attention,
        }
        if outputs[0].response_logprobs is not None:  # verl: present iff row 0 has them
            out["rollout_log_probs"] = logprobs
        if all(o.reward_score is not None for o in outputs):
            scores = np.zeros((n, R), dtype=np.float32)
            for i, o in enumerate(outputs):
                scores[i, max(0, min(len(o.response_ids), R) - 1)] = o.reward_score
            out["rm_scores"] = scores
        non_tensor = {"__num_turns__": np.array([o.num_turns for o in outputs], dtype=np.int32)}
        keys = {k for o in outputs for k in o.extra_fields}
        for key in keys:
            non_tensor[key] = np.array([o.extra_fields.get(key) for o in outputs], dtype=object)
        return DataProto(out, non_tensor, {"metrics": [o.metrics.model_dump() for o in outputs]})


class _Handle:
    """A Ray actor handle's shape: ``handle.generate_sequences.remote(batch)``."""

    def __init__(self, worker):
        self.generate_sequences = type("M", (), {"remote": staticmethod(worker.generate_sequences)})


class AgentLoopManager:
    def __init__(self, config, llm_client, teacher_client=None, reward_loop_worker_handles=None):
        self.config = config
        self.rollout_config = config.actor_rollout_ref.rollout
        self.llm_client = llm_client
        self.agent_loop_workers = [
            _Handle(AgentLoopWorker(config, llm_client))
            for _ in range(self.rollout_config.agent.num_workers)
        ]

    async def generate_sequences(self, prompts: DataProto) -> DataProto:
        chunks = prompts.chunk(len(self.agent_loop_workers))
        outputs = await asyncio.gather(
            *[
                w.generate_sequences.remote(c)
                for w, c in zip(self.agent_loop_workers, chunks, strict=True)
            ]
        )
        output = DataProto.concat(list(outputs))
        output.meta_info = {"timing": {}}
        return output
