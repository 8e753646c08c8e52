"""The training progress bar: created on the driver's fit() over total_training_steps, one tick per step."""

import pytest
from support import env_file_logger

import recipe.pc.pc_ray_trainer as pc_ray_trainer
from recipe.pc import metric_names as names
from recipe.pc.testing import build_trainer, step_records


class RecordingBar:
    made: list = []

    def __init__(self, total, initial, desc):
        self.total, self.initial, self.desc = total, initial, desc
        self.ticks, self.postfixes, self.closed = 0, [], False
        RecordingBar.made.append(self)

    def update(self, n):
        self.ticks += n

    def set_postfix(self, refresh=True, **values):
        self.postfixes.append(values)

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    RecordingBar.made = []
    monkeypatch.setattr(pc_ray_trainer, "tqdm", RecordingBar)
    return RecordingBar.made


def test_one_tick_per_step_with_the_rounds_it_took(tmp_path, tokenizer, bars):
    log = env_file_logger(tmp_path)
    build_trainer(tmp_path, tokenizer, extra=["trainer.total_training_steps=3"]).fit()
    (bar,) = bars
    assert (bar.total, bar.initial, bar.ticks, bar.closed) == (3, 0, 3, True)
    logged_rounds = [r[names.ROUNDS] for r in step_records(log)]
    assert [p["rounds"] for p in bar.postfixes] == logged_rounds


def test_bar_closes_when_the_data_runs_out(tmp_path, tokenizer, bars):
    env_file_logger(tmp_path)
    # No step limit: verl derives one from the dataloader (5 batches x 1 epoch), which the bar shows.
    trainer = build_trainer(tmp_path, tokenizer, extra=["trainer.total_training_steps=null", "trainer.total_epochs=1"])
    trainer.fit()
    (bar,) = bars
    assert bar.total == trainer.total_training_steps == 5
    assert 0 < bar.ticks < 5 and bar.closed
