import os
import sys

import pytest
from hypothesis import settings

# Property tests must not fail on a slow or loaded CI machine: no per-example deadline.
settings.register_profile("pilot-commit", deadline=None)
settings.load_profile("pilot-commit")

HERE = os.path.dirname(os.path.abspath(__file__))
# verl's wheel installs a top-level `tests` package: the shared helpers (support.py) are imported by module name,
# from every folder, not as `tests.*`.
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def tokenizer():
    from recipe.pc.testing.standins import make_tokenizer

    return make_tokenizer()
