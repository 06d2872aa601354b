"""Step-level agent rollouts inside OpenRLHF's vLLM ``RolloutRayActor`` (docs/design.md §2 and §4).

- :mod:`.config`: :class:`RolloutConfig`, shipped from the driver to the rollout actors in an environment variable.
- :mod:`.agent_executor`: the ``--train.agent_func_path`` file (class ``AgentExecutor``): one episode per call.
"""
import os

#: the file to pass as ``--train.agent_func_path``
AGENT_FUNC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_executor.py")
