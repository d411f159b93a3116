"""Is the twin faithful to real measurements: the twin and the replayed baselines against a measured folder, and the shared parts that read and calibrate on one."""
