import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a CI run must not turn red on a draw the
# previous run did not make). To search wider, run repeatedly with HYPOTHESIS_PROFILE=explore
# (random draws); a failure prints the @reproduce_failure blob to pin it as a regression test.
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "golden"))

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside the repository")
    return SHARED_DATA
