"""actor_rollout_ref.model.use_fused_kernels=true (the one-GPU scripts' default) gives the log-probs, entropies and
gradients of verl's default path.

Both paths run through verl 0.9.1's own actor engine code on CPU in fp32: the model patched as the engine patches it
(``apply_monkey_patch``, ``verl/workers/engine/fsdp/transformer_impl.py`` ``_build_module``), the micro-batch in the
engine's no-padding layout (``left_right_2_no_padding``), then ``FSDPEngineWithLMHead.prepare_model_inputs``, the
model and ``prepare_model_outputs`` as its ``forward_step`` calls them, without remove-padding, as the one-GPU
scripts run. The default path computes ``logprobs_from_logits`` over the full logits (without flash-attn: verl's
row-by-row loop); the fused one lets the patched model compute them from the hidden states in chunks.
"""

import types

import pytest
import torch
from tensordict import TensorDict
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
from verl.models.transformers.monkey_patch import apply_monkey_patch
from verl.utils import tensordict_utils as tu
from verl.utils import torch_functional as verl_F
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

VOCAB = 320
SHAPE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
MODELS = {  # SmolLM2 is a Llama; the paper's models are Qwen
    "llama": (LlamaForCausalLM, LlamaConfig(vocab_size=VOCAB, tie_word_embeddings=True, **SHAPE)),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(vocab_size=VOCAB, tie_word_embeddings=False, **SHAPE)),
}


def padded_batch() -> TensorDict:
    """Four rows of left-padded prompts and right-padded responses of different lengths, as the rollout returns."""
    gen = torch.Generator().manual_seed(1)
    prompt_len, response_len = torch.tensor([6, 3, 4, 2]), torch.tensor([5, 2, 5, 1])
    prompt_mask = (torch.arange(6).flip(0)[None] < prompt_len[:, None]).long()
    response_mask = (torch.arange(5)[None] < response_len[:, None]).long()
    attention_mask = torch.cat([prompt_mask, response_mask], 1)
    input_ids = torch.randint(1, VOCAB, (4, 11), generator=gen) * attention_mask
    return TensorDict(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "response_mask": response_mask,
            "position_ids": (attention_mask.cumsum(1) - 1).clamp(min=0),
            "prompts": input_ids[:, :6],
            "responses": input_ids[:, 6:],
        },
        batch_size=[4],
    )


def engine_forward(arch: str, fused: bool, temperature: float):
    """Response log-probs and entropies of a freshly seeded model through verl's engine code, and the gradients of
    their masked sum."""
    model_cls, config = MODELS[arch]
    torch.manual_seed(0)
    model = model_cls(config)
    stock_forward = model_cls.forward
    try:
        apply_monkey_patch(model, use_remove_padding=False, use_fused_kernels=fused, fused_kernels_backend="torch")
        engine = object.__new__(FSDPEngineWithLMHead)  # the attributes its two methods read, unsharded
        engine.module, engine.pad_to_length, engine.use_ulysses_sp = model, False, False
        engine.engine_config = types.SimpleNamespace(
            entropy_checkpointing=False, entropy_from_logits_with_chunking=False
        )
        engine.compute_entropy_from_logits = verl_F.entropy_from_logits
        data = left_right_2_no_padding(padded_batch())
        tu.assign_non_tensor(
            data, use_remove_padding=False, use_fused_kernels=fused, calculate_entropy=True, temperature=temperature
        )
        inputs, output_args = engine.prepare_model_inputs(data)
        outputs = engine.prepare_model_outputs(model(**inputs, use_cache=False), output_args, data, None)
    finally:
        model_cls.forward = stock_forward  # the patch replaces the class's forward
    log_probs = no_padding_2_padding(outputs["log_probs"], data)
    entropy = no_padding_2_padding(outputs["entropy"], data)
    ((log_probs + 0.1 * entropy) * data["response_mask"]).sum().backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    return log_probs.detach(), entropy.detach(), grads, data["response_mask"].bool()


@pytest.mark.parametrize("arch", sorted(MODELS))
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_fused_kernels_match_the_default_path(arch, temperature):
    log_probs, entropy, grads, mask = engine_forward(arch, fused=False, temperature=temperature)
    fused_log_probs, fused_entropy, fused_grads, _ = engine_forward(arch, fused=True, temperature=temperature)
    assert log_probs[mask].lt(-1).all()  # real log-probs of a random model over 320 tokens, not zeros
    torch.testing.assert_close(fused_log_probs[mask], log_probs[mask], rtol=0, atol=1e-5)
    torch.testing.assert_close(fused_entropy[mask], entropy[mask], rtol=0, atol=1e-5)
    assert grads.keys() == fused_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(fused_grads[name], grad, rtol=0, atol=1e-5, msg=name)
    assert max(g.abs().max() for g in grads.values()) > 1e-3  # the gradients compared are not all zero
