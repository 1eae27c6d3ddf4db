"""verifiers plugin id ``agentenv_coding``: agentenv's coding taskset and multi-turn env.

verifiers resolves ``--env.taskset.id agentenv_coding`` by importing this package and taking
the ``Taskset`` and ``Env`` subclasses in ``__all__``. The code is
:mod:`agentenv.integrations.verifiers`.
"""

from agentenv.integrations.verifiers import CodingTaskset, CodingVerifiersEnv

__all__ = ["CodingTaskset", "CodingVerifiersEnv"]
