"""The ALFWorld leg's own quickstart settings (agents/alfworld/quickstart.py: OPTIONS) and its configure hook: the
smoke preset's values of those options, given only where the user set none."""
from dataclasses import asdict, make_dataclass

from agents.alfworld.quickstart import OPTIONS, SMOKE, configure

Config = make_dataclass("Config", [(o.name, o.type, o.default) for o in OPTIONS])


def test_smoke_values_are_of_its_options_and_yield_to_the_user():
    assert set(SMOKE) <= {o.name for o in OPTIONS}
    assert configure(Config(), set(), False) == Config()
    smoke = asdict(configure(Config(), set(), True))
    assert smoke == {**asdict(Config()), **SMOKE}
    mine = configure(Config(max_receptacles=5), {"max_receptacles"}, True)
    assert mine.max_receptacles == 5 and mine.max_distractor_types == SMOKE["max_distractor_types"]
