"""RayPCTrainer's update follows verl 0.9.1's ``RayPPOTrainer.fit`` block by block; this pins the source it was
written against, so a verl upgrade fails here until someone has reviewed ``recipe/pc/update.py`` against the new one."""

import hashlib
import inspect

from verl.trainer.ppo.ray_trainer import RayPPOTrainer

import recipe.pc.generation as generation_module
import recipe.pc.pc_ray_trainer as trainer_module
import recipe.pc.update as update_module
from recipe.pc.settings import check_supported_options

VERL_FIT_SHA256 = "2cd5b737f76215aad3a1be94404c7a7d1d6a4cf9d6c16f44bc4841b871498ed7"

# Blocks of verl's fit that the Pilot-Commit trainer runs too: a call or key both sources hold.
FOLLOWED = [
    "_balance_batch(",
    "global_token_num",
    "images_seqlens",
    "_compute_old_log_prob(",
    "routed_experts",
    "calculate_debug_metrics",
    "_compute_ref_log_prob(",
    "_compute_values(",
    "apply_kl_penalty(",
    "compute_advantage(",
    "_update_critic(",
    "critic_warmup",
    "_update_actor(",
    "_save_checkpoint(",
    "update_weights(",
    "_validate(",
    "compute_data_metrics(",
    "gdpo_reward_keys",
    "compute_timing_metrics(",
    "compute_throughout_metrics(",
    "compute_variance_proxy_metrics(",
    "compute_spec_decode_metrics(",
    "on_batch_end",
    "async_calls_finalize_fn_exec",
    "_shutdown_dump_executor(",
]
# Blocks it does not run, each refused at start-up where a config could ask for it.
LEFT_OUT = {
    "rollout_correction": "refused by settings.check_supported_options: reused pilots lack behaviour log-probs",
    "_start_profiling(": "refused through settings.STOCK_OPTIONS_NOT_RUN (global_profiler.steps)",
    "should_save_ckpt_esi(": "refused through settings.STOCK_OPTIONS_NOT_RUN (trainer.esi_redundant_time)",
}


def test_the_update_was_written_against_this_verl_fit():
    source = inspect.getsource(RayPPOTrainer.fit)
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == VERL_FIT_SHA256, (
        "verl's RayPPOTrainer.fit changed: review recipe/pc/update.py and pc_ray_trainer.py against it, then pin "
        f"the new hash {digest}"
    )


def test_every_block_of_verls_fit_is_followed_or_refused():
    verl_fit = inspect.getsource(RayPPOTrainer.fit)
    ours = "".join(inspect.getsource(m) for m in (trainer_module, update_module, generation_module))
    for marker in FOLLOWED:
        assert marker in verl_fit, f"{marker} is no longer in verl's fit: update this list"
        assert marker in ours, f"verl's fit runs {marker}, the Pilot-Commit trainer does not"
    for marker, how in LEFT_OUT.items():
        assert marker in verl_fit, f"{marker} is no longer in verl's fit: update this list"
        if marker == "rollout_correction":  # refused at start-up, before Ray, where --validate sees it
            assert marker in inspect.getsource(check_supported_options), how
        else:
            assert marker not in ours, how
