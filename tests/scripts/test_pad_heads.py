"""scripts/gpu/pad_heads.py: the padded model computes the original's logits, and its head counts split over 2 GPUs."""

import importlib.util
import json
import os

import pytest
import torch
from support import ROOT
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

spec = importlib.util.spec_from_file_location("pad_heads", os.path.join(ROOT, "scripts", "gpu", "pad_heads.py"))
pad_heads = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pad_heads)

# SmolLM2-135M's shape in miniature: 9 query heads over 3 key-value heads (groups of 3), which TP 2 cannot split.
SHAPE = dict(vocab_size=64, hidden_size=72, intermediate_size=96, num_hidden_layers=2, num_attention_heads=9)
SHAPE.update(num_key_value_heads=3, max_position_embeddings=64, tie_word_embeddings=True)


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "qkv_bias"])
def test_padded_model_computes_the_same_logits_and_splits_over_two_gpus(tmp_path, bias):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SHAPE, attention_bias=bias)).eval()
    for name, p in model.named_parameters():
        if name.endswith("_proj.bias"):  # biases start at zero; make them count
            torch.nn.init.normal_(p)
    model.save_pretrained(tmp_path / "src")
    # Configs written before head_dim was saved leave it to hidden_size / heads, which padding changes.
    config = json.loads((tmp_path / "src" / "config.json").read_text())
    config.pop("head_dim", None)
    (tmp_path / "src" / "config.json").write_text(json.dumps(config))

    assert pad_heads.main([str(tmp_path / "src"), str(tmp_path / "dst"), "--kv-heads", "4"]) == 0

    written = json.loads((tmp_path / "dst" / "config.json").read_text())
    assert (written["num_attention_heads"], written["num_key_value_heads"], written["head_dim"]) == (12, 4, 8)
    assert written["num_attention_heads"] % 2 == 0 and written["num_key_value_heads"] % 2 == 0
    padded = AutoModelForCausalLM.from_pretrained(tmp_path / "dst").eval()
    ids = torch.randint(0, SHAPE["vocab_size"], (3, 17))
    with torch.no_grad():
        torch.testing.assert_close(padded(ids).logits, model(ids).logits, rtol=0, atol=1e-5)


def test_added_heads_get_no_gradient(tmp_path):
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**SHAPE)).save_pretrained(tmp_path / "src")
    pad_heads.main([str(tmp_path / "src"), str(tmp_path / "dst"), "--kv-heads", "4"])
    padded = AutoModelForCausalLM.from_pretrained(tmp_path / "dst")
    ids = torch.randint(0, SHAPE["vocab_size"], (2, 11))
    padded(ids, labels=ids).loss.backward()
    real_q, real_kv = 9 * 8, 3 * 8
    for layer in padded.model.layers:
        attn = layer.self_attn
        for proj, real in ((attn.q_proj, real_q), (attn.k_proj, real_kv), (attn.v_proj, real_kv)):
            assert proj.weight.grad[real:].abs().max() == 0 and proj.weight.grad[:real].abs().max() > 0
        assert attn.o_proj.weight.grad[:, real_q:].abs().max() == 0


def test_heads_can_only_be_added(tmp_path, capsys):
    LlamaForCausalLM(LlamaConfig(**SHAPE)).save_pretrained(tmp_path / "src")
    capsys.readouterr()  # transformers' progress bar
    assert pad_heads.main([str(tmp_path / "src"), str(tmp_path / "dst"), "--kv-heads", "2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "pad_heads: --kv-heads 2 is below the model's 3 key-value heads: heads can only be added"
    )


def test_only_llama_models_are_padded(tmp_path, capsys):
    # vLLM's Qwen2 attention takes its head size from hidden_size / heads, not head_dim: a padded one would not load.
    Qwen2ForCausalLM(Qwen2Config(**SHAPE)).save_pretrained(tmp_path / "src")
    capsys.readouterr()
    assert pad_heads.main([str(tmp_path / "src"), str(tmp_path / "dst"), "--kv-heads", "4"]) == 2
    assert capsys.readouterr().err.strip() == (
        "pad_heads: model_type 'qwen2': only llama models can be padded (vLLM reads head_dim for them)"
    )
