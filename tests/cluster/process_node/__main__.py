"""``python -m tests.cluster.process_node <node folder>``: run one process node's agent."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cluster.process_node import agent

if __name__ == "__main__":
    sys.exit(agent.main(Path(sys.argv[1])))
