"""Giving up a recorded batch (``scijudge batches RUN --abandon ID``): under the run's writer lock, a cancel sent
to the provider when the batch may still run (so it stops billing), then its lines go back to pending."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scijudge.errors import BatchFault, ModelError
from scijudge.run._writer_lock import WriterLock
from scijudge.run.batch.store import FINAL_STATUSES, BatchRecord, BatchStore


@dataclass
class Abandoned:
    """The batch given up, and what the provider was told: ``cancelled`` (a cancel was accepted), or
    ``warning`` (the batch may still run and be billed: the cancel could not be sent, and why)."""

    record: BatchRecord
    cancelled: bool = False
    warning: str | None = None


def abandon_batch(run: str | Path, batch_id: str) -> Abandoned:
    """Give up batch ``batch_id`` (remote or client id) of run store ``run``.

    Raises:
        RunBusyError: another process writes the store (it may be polling this very batch).
        KeyError: no such batch; ValueError: it was collected already.
    """
    lock = WriterLock(Path(run))
    try:
        store = BatchStore(run)
        try:
            record = store.find(batch_id)
            if record is None:
                raise KeyError(batch_id)
            if record.processed:
                raise ValueError(f"batch {batch_id} was already collected ({record.status}); nothing to abandon")
            outcome = Abandoned(record)
            if record.remote_id is not None and record.status not in FINAL_STATUSES:
                try:
                    _client(record).cancel(record.remote_id)
                    outcome.cancelled = True
                except (BatchFault, ModelError) as exc:
                    outcome.warning = (f"could not cancel batch {record.remote_id} at the provider ({exc}); it may "
                                       "still run and be billed: cancel it in the provider's console")
            if record.remote_id is None:  # its create was sent but never confirmed
                outcome.warning = (f"batch {record.client_id} was never confirmed as created: if the provider did "
                                   "create it, it may still run and bill it; look for a batch with metadata "
                                   f"scijudge_client_id = {record.client_id} in the provider's console and cancel "
                                   "it there")
            outcome.record = store.abandon(record.client_id)
            return outcome
        finally:
            store.close()
    finally:
        lock.release()


def _client(record: BatchRecord) -> Any:
    """A batch client for the recorded provider and endpoint; the key from the provider's environment variable
    (a self-hosted endpoint takes any key)."""
    if record.provider == "anthropic":
        from scijudge.run.batch.anthropic import AnthropicBatchAPI

        key = os.environ.get("ANTHROPIC_API_KEY") or ("sk-no-key" if record.endpoint else None)
        return AnthropicBatchAPI(record.endpoint, key)
    from scijudge.run.batch.openai import OpenAIBatchAPI

    key = os.environ.get("OPENAI_API_KEY") or ("sk-no-key" if record.endpoint else None)
    return OpenAIBatchAPI(record.endpoint, key)
