"""Entry point: ``python -m recipe.pc.main_pc <hydra overrides>``.

Composes ``config/pc_trainer.yaml`` over verl's packaged ``ppo_trainer`` and runs verl's
``run_ppo`` with a TaskRunner that builds RayPCTrainer (or, with ``algorithm.rollout_allocation``
set to ``grpo``/``dapo``, the baseline trainer) on the legacy (non-V1) path, whatever
``trainer.use_v1`` says.
"""

from __future__ import annotations

import os
import socket

import hydra
import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo import run_ppo
from verl.trainer.main_ppo_v0 import BaseTaskRunner
from verl.utils.device import auto_set_device

from recipe.pc.settings import PCSettings


@ray.remote(num_cpus=1)
class PCTaskRunner(BaseTaskRunner):
    """Builds workers, datasets and RayPCTrainer inside the Ray cluster, then trains."""

    def run(self, config):
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        from recipe.pc.baseline_trainer import RayBaselineTrainer
        from recipe.pc.pc_ray_trainer import RayPCTrainer

        print(f"PCTaskRunner on {socket.gethostname()}, pid {os.getpid()}")
        OmegaConf.resolve(config)
        _, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )

        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        resource_pool_manager = self.init_resource_pool_mgr(config)
        train_dataset = create_rl_dataset(
            config.data.train_files,
            config.data,
            tokenizer,
            processor,
            is_train=True,
            max_samples=config.data.get("train_max_samples", -1),
        )
        val_dataset = create_rl_dataset(
            config.data.val_files,
            config.data,
            tokenizer,
            processor,
            is_train=False,
            max_samples=config.data.get("val_max_samples", -1),
        )
        method = PCSettings.from_config(config).method
        trainer_cls = RayPCTrainer if method == "pilot_commit" else RayBaselineTrainer
        trainer = trainer_cls(
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=ray_worker_group_cls,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train_dataset),
        )
        trainer.init_workers()
        trainer.fit()


@hydra.main(config_path="config", config_name="pc_trainer", version_base=None)
def main(config):
    auto_set_device(config)
    PCSettings.from_config(config)  # fail on a bad PC key here, before Ray and the workers start
    run_ppo(config, task_runner_class=PCTaskRunner)


if __name__ == "__main__":
    main()
