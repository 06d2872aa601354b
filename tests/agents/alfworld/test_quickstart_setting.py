"""The setting line a record carries names the test panels' generator seed the quickstart really used."""
from agents.alfworld.quickstart import setting_data
from gaca_openrlhf.bench.quickstart.config import TEST_SEED_OFFSET


def test_setting_names_the_test_panels_seed_and_the_retired_panel():
    cfg = {"task_types": "1", "max_receptacles": 6, "max_distractor_types": 0, "train_games": 256, "data_seed": 3,
           "retired_games": 64}
    line = setting_data(cfg)
    assert f"test panels of generator seed {TEST_SEED_OFFSET + 3}, excluding the retired tuning panel" in line
    # a record from before the retired panel (its config has no such key) drew its test panels with the train seed
    old = setting_data({k: v for k, v in cfg.items() if k != "retired_games"})
    assert "test panels of the train games' generator seed" in old and "retired" not in old
