"""On a real Flink on this machine: the decision loop, TaskManager recovery times and the twin fitted on the local cluster."""
