import os
import sys

import pytest
from hypothesis import settings

# Property tests must not fail on a slow or loaded CI machine: no per-example deadline.
settings.register_profile("pilot-commit", deadline=None)
settings.load_profile("pilot-commit")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# verl's wheel installs a top-level `tests` package: import our helpers by module name, not as `tests.*`.
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CONFIG_DIR = os.path.join(ROOT, "recipe", "pc", "config")


def compose_pc_config(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name="pc_trainer", overrides=overrides)


@pytest.fixture
def tokenizer():
    from pc_standins import make_tokenizer

    return make_tokenizer()
