"""The differential fidelity suite: honest function-level programs graded by plain Python and by agentenv.

``corpus/*.toml`` holds the programs as data, one file per style (see ``harness.load_corpus``);
``harness`` grades each program both ways and compares the verdict of every check.
"""
