"""Read a workdir: stats, plan, inspect, score."""
