"""verl.protocol.DataProto (verl 0.9.1), the operations the integration uses."""

from __future__ import annotations

import numpy as np


class DataProto:
    def __init__(self, batch=None, non_tensor_batch=None, meta_info=None):
        self.batch = batch or {}
        self.non_tensor_batch = non_tensor_batch or {}
        self.meta_info = meta_info or {}

    def __len__(self):
        if self.batch:
            return len(next(iter(self.batch.values())))
        return len(next(iter(self.non_tensor_batch.values()))) if self.non_tensor_batch else 0

    def select_idxs(self, idxs):
        idxs = np.asarray(idxs, dtype=np.int64)
        return DataProto(
            {k: v[idxs] for k, v in self.batch.items()},
            {k: v[idxs] for k, v in self.non_tensor_batch.items()},
            dict(self.meta_info),
        )

    def chunk(self, chunks):
        # verl asserts an even split
        assert len(self) % chunks == 0, f"only support equal chunk. Got size {len(self)}"
        size = len(self) // chunks
        return [self.select_idxs(range(i * size, (i + 1) * size)) for i in range(chunks)]

    def pop(self, batch_keys=None, non_tensor_batch_keys=None, meta_info_keys=None):
        batch = {k: self.batch.pop(k) for k in batch_keys or []}
        non_tensor = {k: self.non_tensor_batch.pop(k) for k in non_tensor_batch_keys or []}
        return DataProto(batch, non_tensor, {})

    @staticmethod
    def concat(data):
        keys = [set(d.non_tensor_batch) for d in data]
        assert all(k == keys[0] for k in keys), f"non-tensor keys differ: {keys}"
        bkeys = [set(d.batch) for d in data]
        assert all(k == bkeys[0] for k in bkeys), f"tensor keys differ: {bkeys}"
        batch = {k: np.concatenate([d.batch[k] for d in data]) for k in data[0].batch}
        non_tensor = {
            k: np.concatenate([d.non_tensor_batch[k] for d in data])
            for k in data[0].non_tensor_batch
        }
        meta = {}
        for d in data:
            for k, v in d.meta_info.items():
                if k != "metrics":
                    assert meta.setdefault(k, v) == v, f"Conflicting values for meta_info key '{k}'"
        return DataProto(batch, non_tensor, meta)
