"""Write a copy of a Llama-architecture model with zero attention heads added, computing the same function.

Rollout tensor parallel 2 needs attention and key-value head counts that split over two GPUs; SmolLM2-135M has 9 and
3. Each added key-value head comes with its own group of query heads (the same group size, so every original query
head keeps its key-value head), and all of their weights are zero: the added heads' values are zero, so they add
nothing to the attention output, and their gradients stay zero, so training keeps them at zero. The model so trains
and generates as the original does, up to floating-point rounding, at any split the new counts allow.

Only ``model_type`` llama: the padded model's heads times head size exceed its hidden size, which the config's
``head_dim`` states; transformers' and vLLM's Llama read it, while vLLM's Qwen2 derives the head size from the
hidden size and would not load the padded weights.

    python scripts/gpu/pad_heads.py IN_DIR OUT_DIR --kv-heads 4   # SmolLM2-135M: 9 + 3 -> 12 query, 4 key-value
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"


def padded_counts(config: dict, kv_heads: int) -> tuple[int, int, int]:
    """(query heads, key-value heads, head size) after padding to ``kv_heads`` key-value heads."""
    if config.get("model_type") != "llama":
        raise ValueError(
            f"model_type {config.get('model_type')!r}: only llama models can be padded (vLLM reads head_dim for them)"
        )
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    if kv_heads < kv:
        raise ValueError(f"--kv-heads {kv_heads} is below the model's {kv} key-value heads: heads can only be added")
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return kv_heads * (heads // kv), kv_heads, head_dim


def pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.cat([t, t.new_zeros((rows - t.shape[0], *t.shape[1:]))])


def pad_state(state: dict[str, torch.Tensor], heads: int, kv_heads: int, head_dim: int) -> dict[str, torch.Tensor]:
    """Zero rows after the existing heads of every q/k/v projection (weights and biases), and zero columns after
    them in every o_proj: added heads go last, so head h keeps key-value head h // group size."""
    out = {}
    for name, t in state.items():
        if ".self_attn.q_proj." in name:
            t = pad_rows(t, heads * head_dim)
        elif ".self_attn.k_proj." in name or ".self_attn.v_proj." in name:
            t = pad_rows(t, kv_heads * head_dim)
        elif ".self_attn.o_proj.weight" in name:
            t = pad_rows(t.T, heads * head_dim).T.contiguous()
        out[name] = t
    return out


def pad_model(src: Path, dst: Path, kv_heads: int) -> tuple[int, int]:
    config = json.loads((src / "config.json").read_text())
    if not (src / WEIGHTS).is_file():
        raise FileNotFoundError(f"{src / WEIGHTS} not found: pad_heads reads one unsharded safetensors file")
    heads, kv, head_dim = padded_counts(config, kv_heads)
    dst.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.is_file() and path.name not in ("config.json", WEIGHTS) and not path.name.endswith(".index.json"):
            shutil.copy2(path, dst / path.name)
    save_file(pad_state(load_file(src / WEIGHTS), heads, kv, head_dim), dst / WEIGHTS, metadata={"format": "pt"})
    config.update(num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim)
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return heads, kv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="a Hugging Face model folder (config.json, model.safetensors)")
    parser.add_argument("dst", type=Path, help="the folder to write")
    parser.add_argument("--kv-heads", type=int, required=True, help="key-value heads after padding")
    args = parser.parse_args(argv)
    try:
        heads, kv = pad_model(args.src, args.dst, args.kv_heads)
    except (OSError, ValueError, KeyError) as err:
        print(f"pad_heads: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.dst}: {heads} query heads, {kv} key-value heads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
