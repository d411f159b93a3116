"""What flinktune saves against the baselines: replays over seeds, scenario matrices and traces, the CPU bound, and the surrogates' regret."""
