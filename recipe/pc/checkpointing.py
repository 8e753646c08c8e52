"""Saving and resuming the Pilot-Commit state beside verl's actor checkpoint.

``global_step_N/pilot_commit_state.pt`` (``recipe.pc.checkpoint``) holds what verl's checkpoint does not: the
allocator's state under its own key (the buffer, eviction marks, screened pilots), the prompt filter's (skipping),
the run counters, the RNG, the dataset's evictions. It is written before verl's files, so verl's "latest" marker,
written last, never names a folder without a complete state.

Part of ``RayPCTrainer`` (``recipe.pc.pc_ray_trainer``).
"""

from __future__ import annotations

import logging
import os
import zlib

import numpy as np
from omegaconf import open_dict
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

from recipe.pc import checkpoint as ckpt

logger = logging.getLogger(__name__)

PC_STATE_FILE = ckpt.STATE_FILE


class CheckpointMixin:
    """The checkpoint side of ``RayPCTrainer``: its attributes are declared in ``RayPCTrainer.__init__``."""

    def _save_checkpoint(self):
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        ckpt.write_state(self._pc_state(), os.path.join(folder, PC_STATE_FILE))
        super()._save_checkpoint()
        self._last_saved_step = self.global_steps
        keep = {folder} | ({self._resumed_from} if self._resumed_from else set())
        ckpt.prune_states(self.config.trainer.default_local_dir, keep)
        logger.info("saved PC state at step %d: %s", self.global_steps, self._pc_state_summary())

    def _load_checkpoint(self):
        folder = self._resumed_folder()
        if folder is None:
            return super()._load_checkpoint()
        state_path = os.path.join(folder, PC_STATE_FILE)
        if not os.path.exists(state_path):
            folder = self._fall_back_from(folder)
            state_path = os.path.join(folder, PC_STATE_FILE)
        # Read and checked before verl loads the actor: a bad state fails fast, before any step.
        state = ckpt.read_state(state_path, self._state_config())
        self._check_allocator(state, state_path)
        # The allocator's own state too: one that does not fit these settings is refused before verl loads the actor.
        self._load_state_part(state_path, self.allocator.load_state_dict, state["allocator"]["state"])
        trainer_cfg = self.config.trainer
        saved = (trainer_cfg.resume_mode, trainer_cfg.get("resume_from_path"))
        with open_dict(trainer_cfg):
            trainer_cfg.resume_mode, trainer_cfg.resume_from_path = "resume_path", folder
            try:
                super()._load_checkpoint()
            finally:
                trainer_cfg.resume_mode, trainer_cfg.resume_from_path = saved
        self._load_state_part(state_path, self._load_pc_state, state)
        self._resumed_from = folder
        logger.info("resumed PC state at step %d: %s", self.global_steps, self._pc_state_summary())
        # verl skips the dataloader state when global_steps looks like an epoch end (one batch per step);
        # here a step spans several batches, so the saved position is always the one to resume from.
        data_path = os.path.join(folder, "data.pt")
        if os.path.exists(data_path):
            self.train_dataloader.load_state_dict(ckpt.load_plain_data(data_path))

    @staticmethod
    def _load_state_part(path: str, load, part) -> None:
        """``load(part)``, naming the state file when the part is malformed or refused."""
        try:
            load(part)
        except ckpt.CheckpointError as err:
            raise ckpt.CheckpointError(f"{path}: {err}") from err
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ckpt.CheckpointError(f"{path} is malformed: {type(err).__name__}: {err}") from err

    def _check_allocator(self, state: dict, path: str) -> None:
        saved = state["allocator"]["name"]
        if saved is not None and saved != self.pc.method:
            raise ckpt.CheckpointError(
                f"{path} was written by algorithm.rollout_allocation={saved}, not {self.pc.method}; resume with "
                "the allocator it was saved with"
            )

    def _resumed_folder(self) -> str | None:
        """The global_step_N folder verl would resume from, or None for a fresh start."""
        trainer_cfg = self.config.trainer
        if trainer_cfg.resume_mode == "disable":
            return None
        if trainer_cfg.resume_mode == "resume_path":
            return os.path.abspath(trainer_cfg.resume_from_path)
        return find_latest_ckpt_path(os.path.abspath(trainer_cfg.default_local_dir))

    def _fall_back_from(self, folder: str) -> str:
        """The previous complete checkpoint when ``folder`` has no PC state (a save cut short)."""
        root = os.path.dirname(folder)
        step = int(os.path.basename(folder).removeprefix("global_step_"))
        previous = ckpt.previous_complete(root, step) if self.config.trainer.resume_mode == "auto" else None
        if previous is None:
            raise FileNotFoundError(
                f"{os.path.join(folder, PC_STATE_FILE)} is missing and no earlier checkpoint under {root} has a "
                "complete Pilot-Commit state, so the buffer, eviction and counters cannot be restored; resume from a "
                "Pilot-Commit checkpoint or set trainer.resume_mode=disable"
            )
        logger.warning(
            "%s has no Pilot-Commit state (its save did not finish); resuming from %s, the previous complete one",
            folder,
            previous,
        )
        return previous

    def _state_config(self) -> dict:
        """Settings the saved allocator state must agree with (the allocator names them)."""
        return self.pc.allocator.state_settings(self.pc)

    def _pc_state(self) -> dict:
        dataset_state = self.train_dataset.state_dict() if hasattr(self.train_dataset, "state_dict") else None
        filter_state = self.prompt_filter.state_dict()
        allocator_state = self.allocator.state_dict()
        # A component's own state is checked here, by its key path, so a save never writes what a resume cannot read.
        ckpt.check_plain(allocator_state, "allocator")
        ckpt.check_plain(filter_state, str(self.prompt_filter.state_key))
        return {
            "format": ckpt.FORMAT,
            "version": ckpt.VERSION,
            "config": self._state_config(),
            "rng": ckpt.to_plain(self.rng.bit_generator.state, "rng"),
            "dataset": ckpt.to_plain(dataset_state, "dataset"),
            **({} if filter_state is None else {self.prompt_filter.state_key: filter_state}),
            "counters": self.counters.state_dict(),
            "allocator": {"name": self.pc.method, "state": allocator_state},
            **({"val_budgets": self._val_budgets.state_dict()} if self._val_budgets.on else {}),
        }

    def _load_pc_state(self, state: dict) -> None:
        """Everything but the allocator's state, which is loaded (and checked) before the actor."""
        key = self.prompt_filter.state_key
        if key is not None:
            if key in state:
                self.prompt_filter.load_state_dict(state[key])
            else:  # saved with another prompt filter: this one starts afresh
                logger.warning("the resumed state has no %r state of the prompt filter; starting a new one", key)
        self.rng.bit_generator.state = ckpt.from_plain(state["rng"])
        if state["dataset"] is not None:
            self.train_dataset.load_state_dict(ckpt.from_plain(state["dataset"]))
        self.counters.load_state_dict(state["counters"])
        if "val_budgets" in state:
            self._val_budgets.load_state_dict(state["val_budgets"])

    def _pc_state_summary(self) -> str:
        """One line that a save and the resume from it must print identically (checked on the GPU)."""
        evicted = sorted(getattr(self.train_dataset, "evicted_ids", ()))
        c = self.counters
        parts = [
            self.allocator.summary(),
            f"epoch={c.epoch} gen_round={c.gen_round} cumulative_rollouts={c.cumulative_rollouts} "
            f"cumulative_trained={c.cumulative_trained_rollouts} consumed_prompts={c.total_consumed_prompts} "
            f"evicted={len(evicted)} evicted_crc={zlib.crc32(np.asarray(evicted, dtype=np.int64).tobytes()):08x}",
            self.prompt_filter.summary(),
        ]
        return " ".join(p for p in parts if p)
