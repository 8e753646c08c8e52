"""trainer.rollout_data_dir: every generated rollout of fit() is dumped once, with its prompt id and kind."""

import json
import os
from collections import Counter

from support import env_file_logger

from recipe.pc import metric_names as names
from recipe.pc.rollout_dump import discard_after
from recipe.pc.testing import N_COMMIT, N_PILOT, G, build_trainer, step_records


def _read_dump(folder):
    records = {}
    for name in (n for n in os.listdir(folder) if n.endswith(".jsonl")):
        with open(os.path.join(folder, name)) as f:
            records[int(name.removesuffix(".jsonl"))] = [json.loads(line) for line in f]
    return records


def test_pc_dump_holds_every_generated_rollout_with_its_prompt_and_kind(tmp_path, tokenizer):
    log = env_file_logger(tmp_path)
    dump = tmp_path / "rollouts"
    # 3 agent workers: the generation batch is padded, and padding rows must not be dumped.
    trainer = build_trainer(tmp_path, tokenizer, extra=[f"trainer.rollout_data_dir={dump}"])
    trainer.fit()
    steps = step_records(log)
    by_step = _read_dump(dump)
    assert sorted(by_step) == list(range(1, len(steps) + 1))
    calls = trainer.async_rollout_manager.calls
    total = sum(len(rows) for rows in by_step.values())
    assert total == steps[-1][names.CUMULATIVE_SAMPLED]
    assert total < sum(c.num_rows for c in calls)  # the padding rows were left out
    for step, rows in by_step.items():
        record = steps[step - 1]
        kinds = Counter(r["kind"] for r in rows)
        assert kinds["pilot"] == record[names.ROLLOUTS_PILOT]
        assert kinds["commit"] == record[names.ROLLOUTS_COMMIT]
        assert {r["step"] for r in rows} == {step}
        for r in rows:
            assert r["uid"].endswith(f":{r['prompt_id']}")
            assert r["score"] == (1.0 if r["acc"] else -1.0)  # the stand-in's reward: +-1 with acc
            assert r["gts"] == str(r["prompt_id"] + 1)  # write_prompt_parquet's ground truth
            assert r["input"] and isinstance(r["output"], str)
    # Within one round a pilot group has N_PILOT rows and a committed one N_COMMIT.
    first = by_step[2]
    per_group = Counter((r["round"], r["uid"], r["kind"]) for r in first)
    assert {n for (_, _, kind), n in per_group.items() if kind == "pilot"} == {N_PILOT}
    assert {n for (_, _, kind), n in per_group.items() if kind == "commit"} == {N_COMMIT}
    assert len({uid for (_, uid, kind) in per_group if kind == "pilot"}) % G == 0


def test_baseline_dump_tags_groups(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    dump = tmp_path / "rollouts"
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        extra=["algorithm.rollout_allocation=grpo", "data.gen_batch_size=4", f"trainer.rollout_data_dir={dump}"],
    )
    trainer.fit()
    by_step = _read_dump(dump)
    assert {r["kind"] for rows in by_step.values() for r in rows} == {"group"}
    assert all(len(rows) == 4 * N_COMMIT for rows in by_step.values())


def test_dumps_left_by_an_earlier_run_are_replaced_not_appended_to(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    dump = tmp_path / "rollouts"
    dump.mkdir()
    stale = '{"step": 1, "prompt_id": -1, "kind": "pilot", "score": 1.0}\n'
    (dump / "1.jsonl").write_text(stale)
    (dump / "notes.txt").write_text("not a dump")
    trainer = build_trainer(
        tmp_path, tokenizer, extra=[f"trainer.rollout_data_dir={dump}", "trainer.total_training_steps=2"]
    )
    trainer.fit()
    rows = _read_dump(dump)
    assert all(r["prompt_id"] >= 0 for r in rows[1])  # the earlier run's step 1 is gone, not mixed in
    assert (dump / "notes.txt").read_text() == "not a dump"


def test_discard_after_keeps_the_steps_a_resumed_run_does_not_regenerate(tmp_path):
    for step in (1, 2, 3, 10):
        (tmp_path / f"{step}.jsonl").write_text("{}\n")
    removed = discard_after(str(tmp_path), 2)
    assert [os.path.basename(p) for p in removed] == ["10.jsonl", "3.jsonl"]
    assert sorted(os.listdir(tmp_path)) == ["1.jsonl", "2.jsonl"]
    assert discard_after(str(tmp_path / "missing"), 0) == []
