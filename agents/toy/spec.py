"""The toy corridor's :class:`~agents.base.EnvSpec`: integer tasks, no options, no server, no Ray workers, no
demonstrator, no quickstart (development and fast tests only)."""
from agents.base import EnvSpec
from agents.toy.env import PROMPT, make_env

SPEC = EnvSpec(name="toy", make_env=make_env, prompt=PROMPT, eval_prompt_max_len=1024, eval_num_envs=8,
               panel_help="any name", oracle=True)
