"""The scripts that measure flinktune's results, one subpackage per question (README.md says which script answers which).

Run each as a module from the repository root, e.g. ``python -m benchmarks.policy.replay_seeds --help``.
"""
