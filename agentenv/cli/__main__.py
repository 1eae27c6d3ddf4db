"""``python -m agentenv.cli``: the ``agentenv`` command."""

import sys

from agentenv.cli import main

sys.exit(main())
